-- A model seen as Accelerate's placement sees it: parts ({name, module or
-- nil for a tensor}) that split into their children, and layers that never
-- split (no children, or a class named in no_split_module_classes).
local Module = require("accel.nn.module")

local model_parts = {}

local function join(prefix, key)
  return prefix == "" and key or (prefix .. "." .. key)
end

-- A module's own parameters, then its children, then its own buffers.
function model_parts.direct(m, prefix)
  local params, children, buffers = {}, {}, {}
  for _, key in ipairs(m._fields) do
    local v, name = rawget(m, key), join(prefix, Module.field_name(m, key))
    if Module.is_module(v) then
      children[#children + 1] = { name, v }
    elseif m._buffers[key] and v ~= nil then
      buffers[#buffers + 1] = { name }
    elseif type(v) == "userdata" and v.requires_grad and v.is_leaf then
      params[#params + 1] = { name }
    end
  end
  for _, c in ipairs(children) do params[#params + 1] = c end
  for _, b in ipairs(buffers) do params[#params + 1] = b end
  return params
end

-- As Accelerate: only a module with child modules splits; a layer's own
-- tensors (a Linear's weight and bias) stay together.
function model_parts.splittable(part, no_split)
  local m = part[2]
  return m ~= nil and not no_split[m.__name] and #m:named_children() > 0
end

-- The size and name of the largest part that never splits: what an
-- offloaded layer needs on the main device, and the biggest unit of work.
function model_parts.largest_layer(parts, sizes, no_split)
  local largest, name, queue = 0, nil, {}
  for i, p in ipairs(parts) do queue[i] = p end
  while #queue > 0 do
    local part = table.remove(queue, 1)
    if model_parts.splittable(part, no_split) then
      for i, child in ipairs(model_parts.direct(part[2], part[1])) do table.insert(queue, i, child) end
    elseif (sizes[part[1]] or 0) > largest then
      largest, name = sizes[part[1]], part[1]
    end
  end
  return largest, name
end

return model_parts
