-- Where each parameter and buffer of a model goes under a device map
-- ({["blocks.1"] = "disk", [""] = "cpu"}): the entry with the longest name
-- that is the tensor's own name or one of its module prefixes. Every key must
-- name a module or tensor of the model and every tensor must be covered;
-- errors name the key or the tensors.
local Module = require("accel.nn.module")
local devices = require("accel.big_modeling.devices")

local placement = {}

local function sorted(list)
  table.sort(list)
  return list
end

-- A list of {name, module, key, is_buffer, tensor, device, unit}: `module`
-- holds the tensor under `key`; `unit` is the name of the device map entry
-- that placed it.
function placement.resolve(where, model, device_map)
  local map, known = {}, {}
  for _, pair in ipairs(model:named_modules()) do known[pair[1]] = true end
  local entries = {}
  for _, pair in ipairs(model:named_modules()) do
    local prefix, m = pair[1], pair[2]
    for _, key in ipairs(m._fields) do
      local v = rawget(m, key)
      local buffer = m._buffers[key] and v ~= nil
      if buffer or (type(v) == "userdata" and not Module.is_module(v) and v.requires_grad and v.is_leaf) then
        local name = prefix == "" and tostring(key) or (prefix .. "." .. tostring(key))
        known[name] = true
        entries[#entries + 1] = { name = name, module = m, key = key, is_buffer = buffer, tensor = v }
      end
    end
  end
  for key, value in pairs(device_map) do
    if type(key) ~= "string" or not known[key] then
      error(string.format("%s: device_map names '%s', which is no module or tensor of the model",
                          where, tostring(key)), 0)
    end
    map[key] = devices.normalize(value, string.format("%s: device_map[\"%s\"]", where, key))
  end
  local uncovered = {}
  for _, e in ipairs(entries) do
    local name = e.name
    while true do
      if map[name] then
        e.device, e.unit = map[name], name
        break
      end
      if name == "" then break end
      name = name:match("^(.*)%.[^.]*$") or ""
    end
    if not e.device then uncovered[#uncovered + 1] = e.name end
  end
  if #uncovered > 0 then
    error(string.format("%s: device_map places no entry for %s "
                        .. "(add them, or a parent module, or \"\" for the whole model)",
                        where, table.concat(sorted(uncovered), ", ")), 0)
  end
  return entries
end

return placement
