-- Tensors inside nested plain tables (a forward's arguments and results, a
-- batch), walked as Accelerate's recursively_apply walks Python's
-- containers. A plain table is one without a metatable; tensors are the
-- leaves that count, and every other value (numbers, strings, objects with
-- a metatable such as modules) is kept as it is.
local core = require("accel.core")

local tensor_tree = {}

local function is_plain_table(v)
  return type(v) == "table" and getmetatable(v) == nil
end

-- `value` with fn(t) in place of each tensor t; plain tables are rebuilt,
-- so the caller's tables are never changed.
function tensor_tree.map(value, fn)
  if core.is_tensor(value) then return fn(value) end
  if not is_plain_table(value) then return value end
  local out = {}
  for k, v in pairs(value) do out[k] = tensor_tree.map(v, fn) end
  return out
end

-- Calls fn(t) for each tensor t in `value` (an array's elements in order)
-- until one call returns something else than nil, and returns that.
function tensor_tree.each(value, fn)
  if core.is_tensor(value) then return fn(value) end
  if not is_plain_table(value) then return nil end
  for _, v in pairs(value) do
    local found = tensor_tree.each(v, fn)
    if found ~= nil then return found end
  end
  return nil
end

return tensor_tree
