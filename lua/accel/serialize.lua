-- Lua values as text and back, for sending objects between ranks
-- (Accelerator:gather_object). Handles nil, booleans, numbers (inf and NaN
-- too), strings, tables without cycles, and tensors.
local core = require("accel.core")

local serialize = {}

local function encode(value, out, active)
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
    if active[value] then error("cannot serialise a table that contains itself", 0) end
    active[value] = true
    out[#out + 1] = "{"
    for k, v in pairs(value) do
      out[#out + 1] = "["
      encode(k, out, active)
      out[#out + 1] = "]="
      encode(v, out, active)
      out[#out + 1] = ","
    end
    out[#out + 1] = "}"
    active[value] = nil
  elseif kind == "userdata" and value.dtype then
    out[#out + 1] = "tensor("
    encode(value:totable(), out, active)
    out[#out + 1] = string.format(",%q)", value.dtype)
  else
    error("cannot serialise a " .. kind, 0)
  end
end

function serialize.dump(value)
  local out = { "return " }
  encode(value, out, {})
  return table.concat(out)
end

function serialize.load(text)
  local chunk = assert(loadstring(text, "=serialised object"))
  setfenv(chunk, { tensor = function(data, dtype) return core.tensor(data, { dtype = dtype }) end })
  return chunk()
end

return serialize
