-- The default collate: a list of samples (each the list of fields get(i)
-- returned) to one batch value per field. Tensors are stacked along a new
-- first dim; numbers become a tensor of the default float dtype and booleans
-- a bool one (as accel.tensor does: the dtype never follows the values, so a
-- data set's get(i) returns class ids as int64 tensors, accel.LongTensor{y}
-- or accel.tensor(y, {dtype = accel.int64}), not as numbers); strings stay a
-- list; tables are collated key by key.
local core = require("accel.core")

local tensor_metatable = getmetatable(core.zeros(0))

local function collate_values(values, where)
  local first = values[1]
  if getmetatable(first) == tensor_metatable then return core.stack(values, 1) end
  local kind = type(first)
  if kind == "number" or kind == "boolean" then return core.tensor(values) end
  if kind == "string" then return values end
  if kind == "table" then
    local out = {}
    for key in pairs(first) do
      local column = {}
      for i, v in ipairs(values) do column[i] = v[key] end
      out[key] = collate_values(column, where .. "." .. tostring(key))
    end
    return out
  end
  error(string.format("data.DataLoader: cannot collate %s, a %s (give the loader a collate function)",
                      where, kind), 0)
end

-- Returns one batch value per field, in field order.
return function(samples)
  local fields = {}
  for k = 1, #samples[1] do
    local column = {}
    for i, s in ipairs(samples) do column[i] = s[k] end
    fields[k] = collate_values(column, "field " .. k)
  end
  return unpack(fields)
end
