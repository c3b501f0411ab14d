-- The tensors a 4-bit weight saves beside itself, under bitsandbytes' names
-- (QuantState.as_dict(packed = True)), and back:
--   weight.absmax, weight.quant_map, weight.nested_absmax,
--   weight.nested_quant_map, and weight.quant_state.bitsandbytes__<nf4|fp4>:
--   the non-tensor fields as the bytes of Python's json.dumps of
--   {quant_type, blocksize, dtype, shape, nested_blocksize, nested_dtype,
--   nested_offset}.
-- A weight here is the table accel.core.quant speaks (bindings/quant_ops.cpp).
local core = require("accel.core")
local args = require("accel.util.args")

local quant_state = {}

quant_state.tensor_fields = { "absmax", "quant_map", "nested_absmax", "nested_quant_map" }

-- Python's repr of a float: the shortest text that reads back as the same double.
local function python_float(x)
  local text
  for digits = 15, 17 do
    text = string.format("%." .. digits .. "g", x)
    if tonumber(text) == x then break end
  end
  if not text:find("[%.eni]") then text = text .. ".0" end
  return text
end

local function json_text(w)
  local shape = {}
  for i, s in ipairs(w.shape) do shape[i] = string.format("%d", s) end
  local parts = {
    string.format('"quant_type": "%s"', w.quant_type),
    string.format('"blocksize": %d', w.blocksize),
    string.format('"dtype": "%s"', w.dtype),
    string.format('"shape": [%s]', table.concat(shape, ", ")),
  }
  if w.nested_absmax then
    parts[#parts + 1] = string.format('"nested_blocksize": %d', w.nested_blocksize)
    parts[#parts + 1] = '"nested_dtype": "float32"'
    parts[#parts + 1] = '"nested_offset": ' .. python_float(w.nested_offset)
  end
  return "{" .. table.concat(parts, ", ") .. "}"
end

-- The packed key's name for a weight of `quant_type`.
function quant_state.packed_key(quant_type)
  return "quant_state.bitsandbytes__" .. quant_type
end

-- The uint8 tensor of the JSON bytes.
function quant_state.pack(w)
  local text = json_text(w)
  local bytes = {}
  for i = 1, #text do bytes[i] = text:byte(i) end
  return core.tensor(bytes, { dtype = "uint8" })
end

local function text_of(t)
  local bytes, parts = t:reshape(-1):totable(), {}
  for i = 1, #bytes, 4096 do
    parts[#parts + 1] = string.char(unpack(bytes, i, math.min(i + 4095, #bytes)))
  end
  return table.concat(parts)
end

-- The weight table from a module's tensors: `tensors` maps "absmax",
-- "quant_map", ... and the packed key to tensors; `packed` is the uint8
-- codes. `source` names the weight in errors ("'model.layers.0.mlp.up_proj.weight'
-- in 'dir'").
function quant_state.unpack(packed, tensors, source)
  local key, info
  for _, quant_type in ipairs({ "nf4", "fp4" }) do
    local t = tensors[quant_state.packed_key(quant_type)]
    if t then key, info = quant_state.packed_key(quant_type), t end
  end
  if not info then
    args.error(string.format("%s: no weight.quant_state.bitsandbytes__nf4 (or __fp4) beside it", source))
  end
  local fields = core.json.decode(text_of(info), source .. " " .. key)
  local w = { weight = packed }
  for _, name in ipairs(quant_state.tensor_fields) do w[name] = tensors[name] end
  for _, name in ipairs({ "quant_type", "blocksize", "dtype", "shape" }) do
    if fields[name] == nil then args.error(string.format("%s: %s has no '%s'", source, key, name)) end
    w[name] = fields[name]
  end
  if w.nested_absmax then
    w.nested_blocksize = fields.nested_blocksize or 256
    w.nested_offset = fields.nested_offset
    if type(w.nested_offset) ~= "number" then
      args.error(string.format("%s: %s has nested statistics but no 'nested_offset'", source, key))
    end
  end
  if not w.absmax or not w.quant_map then
    args.error(string.format("%s: a 4-bit weight needs weight.absmax and weight.quant_map beside it", source))
  end
  return w
end

return quant_state
