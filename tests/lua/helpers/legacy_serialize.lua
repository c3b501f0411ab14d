-- The text accel.serialize wrote before its binary format ("return " and a
-- Lua table constructor), to check that such files still load. This is the
-- old writer, unchanged except that table keys are written in sorted order.
local legacy = {}

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b)
    if type(a) ~= type(b) then return type(a) < type(b) end
    if type(a) == "boolean" then return not a and b end
    return a < b
  end)
  return keys
end

local function encode(value, out)
  local kind = type(value)
  if kind == "nil" or kind == "boolean" then
    out[#out + 1] = tostring(value)
  elseif kind == "number" then
    if value ~= value then
      out[#out + 1] = "0/0"
    elseif value == math.huge or value == -math.huge then
      out[#out + 1] = value > 0 and "1/0" or "-1/0"
    else
      out[#out + 1] = string.format("%.17g", value)
    end
  elseif kind == "string" then
    out[#out + 1] = string.format("%q", value)
  elseif kind == "table" then
    out[#out + 1] = "{"
    for _, k in ipairs(sorted_keys(value)) do
      out[#out + 1] = "["
      encode(k, out)
      out[#out + 1] = "]="
      encode(value[k], out)
      out[#out + 1] = ","
    end
    out[#out + 1] = "}"
  else
    out[#out + 1] = "tensor("
    encode(value:totable(), out)
    out[#out + 1] = string.format(",%q)", value.dtype)
  end
end

function legacy.dump(value)
  local out = { "return " }
  encode(value, out)
  return table.concat(out)
end

return legacy
