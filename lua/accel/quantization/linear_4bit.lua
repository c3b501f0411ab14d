-- Linear4bit: an nn.Linear whose weight is held in 4 bits, as
-- bnb.nn.Linear4bit (engine/quant/four_bit_weight.h says how): forward
-- decodes the weight in the compute dtype for its product only, and
-- backward keeps nothing but the 4-bit codes, so the frozen base of QLoRA
-- costs ~0.5 byte a parameter in memory and nothing in activations.
-- Gradients reach the input (and a bias that requires one), never the
-- codes. Its state_dict is bitsandbytes': `weight` (the packed uint8 codes,
-- ((out * in + 1) / 2, 1)), `bias`, `weight.absmax`, `weight.quant_map`,
-- with double quantization `weight.nested_absmax` and
-- `weight.nested_quant_map`, and `weight.quant_state.bitsandbytes__nf4`.
--   Linear4bit(linear, {quant_type = "nf4", double_quant = false,
--              compute_dtype = "float32", quant_storage = "uint8"})
-- quantizes the nn.Linear's weight (one on the meta device stays empty
-- until set_quantized or quantize_ fills it). model:to(dtype) leaves the
-- codes and statistics as they are, as PyTorch leaves bitsandbytes'.
-- Under ZeRO-3 / FSDP (shard_storage_) the layer keeps only its rank's
-- blocks of `weight` and `weight.absmax` (engine/quant/four_bit_shards.h)
-- and gathers the whole weight for each forward and backward.
local core = require("accel.core")
local args = require("accel.util.args")
local Linear = require("accel.nn.linear")
local quant_state = require("accel.quantization.quant_state")

local Linear4bit = Linear:extend("Linear4bit")

local where = "Linear4bit"

function Linear4bit:init(linear, options)
  if getmetatable(linear) ~= Linear then
    args.error(where .. ": expected the nn.Linear to quantize, got " .. tostring(linear))
  end
  local o = args.options(where, options, { quant_type = "nf4", double_quant = false, compute_dtype = "float32",
                                           quant_storage = "uint8" },
                         { quant_type = "string", double_quant = "boolean", compute_dtype = "string",
                           quant_storage = "string" })
  rawset(self, "in_features", linear.in_features)
  rawset(self, "out_features", linear.out_features)
  rawset(self, "settings", o)
  rawset(self, "compute_dtype", o.compute_dtype)
  rawset(self, "_fixed_dtypes", {})
  if linear.bias then self.bias = linear.bias end
  if linear.weight.device ~= "meta" then self:quantize_(linear.weight) end
end

-- Quantizes a float weight (out_features, in_features) into this layer.
function Linear4bit:quantize_(weight)
  if weight:dim() ~= 2 or weight:size(1) ~= self.out_features or weight:size(2) ~= self.in_features then
    args.error(string.format("%s: the weight must be (%d, %d), got %s", where, self.out_features, self.in_features,
                             args.shape(weight)))
  end
  local o = self.settings
  self:set_quantized(core.quant.quantize_4bit(weight, { quant_type = o.quant_type, double_quant = o.double_quant,
                                                        quant_storage = o.quant_storage }))
  return self
end

-- Takes a weight table (accel.core.quant's; from quantize_4bit or a folder) as this layer's weight.
function Linear4bit:set_quantized(w)
  local out, inp = w.shape[1], w.shape[2]
  if out ~= self.out_features or inp ~= self.in_features then
    args.error(string.format("%s: a quantized weight of shape (%s, %s) does not fit a layer of %d -> %d", where,
                             tostring(out), tostring(inp), self.in_features, self.out_features))
  end
  rawset(self, "quantized", w)
  local fixed = rawget(self, "_fixed_dtypes")
  local function keep(name, t)
    fixed[name] = true
    if rawget(self, name) == nil then self:register_buffer(name, t) else rawset(self, name, t) end
  end
  keep("weight", w.weight)
  for _, name in ipairs(quant_state.tensor_fields) do
    if w[name] then keep("weight." .. name, w[name]) end
  end
  keep("weight." .. quant_state.packed_key(w.quant_type), quant_state.pack(w))
  return self
end

-- The weight table over this layer's current tensors (a move with
-- model:to(device) replaces them).
function Linear4bit:quantized_weight()
  local w = rawget(self, "quantized")
  if not w then
    args.error(string.format("%s(%d -> %d): no weight yet (built on the meta device and never loaded)", where,
                             self.in_features, self.out_features))
  end
  local t = { weight = rawget(self, "weight") }
  for key, value in pairs(w) do
    if type(value) ~= "userdata" then t[key] = value end
  end
  for _, name in ipairs(quant_state.tensor_fields) do t[name] = rawget(self, "weight." .. name) end
  local shard = rawget(self, "storage_shard")
  if shard then t.quant_storage, t.ranks = shard.quant_storage, shard.ranks end
  return t
end

-- Keeps only this rank's shard of the codes and absmax over `group` (a
-- ProcessGroup): FSDP's sharding of the frozen base. Returns self.
function Linear4bit:shard_storage_(group)
  if rawget(self, "storage_shard") then
    args.error(string.format("%s(%d -> %d): its 4-bit storage is sharded already", where, self.in_features,
                             self.out_features))
  end
  local s = core.quant.shard_4bit(self:quantized_weight(), group)
  rawset(self, "weight", s.weight)
  rawset(self, "weight.absmax", s.absmax)
  rawset(self, "storage_shard", { group = group, quant_storage = s.quant_storage, ranks = s.ranks })
  return self
end

-- The whole codes and absmax again from every rank's shard (a collective
-- over the shard's group). Returns self.
function Linear4bit:unshard_storage_()
  local shard = rawget(self, "storage_shard")
  if not shard then return self end
  local w = core.quant.gather_4bit(self:quantized_weight(), shard.group)
  rawset(self, "storage_shard", nil)
  rawset(self, "weight", w.weight)
  rawset(self, "weight.absmax", w.absmax)
  return self
end

-- The group its storage is sharded over, or nil.
function Linear4bit:storage_group()
  local shard = rawget(self, "storage_shard")
  return shard and shard.group
end

-- The weight decoded, (out_features, in_features), in `dtype` (the one it was quantized from by default).
function Linear4bit:dequantized_weight(dtype)
  local shard = rawget(self, "storage_shard")
  if shard then
    args.error(string.format("%s(%d -> %d): its 4-bit storage is sharded over %d ranks; decode it inside "
                             .. "acc:get_state_dict or after unshard_storage_ (a collective)", where, self.in_features,
                             self.out_features, shard.ranks))
  end
  return core.quant.dequantize_4bit(self:quantized_weight(), dtype)
end

function Linear4bit:forward(x)
  return core.quant.linear_4bit(x, self:quantized_weight(), self.bias, self.compute_dtype, self:storage_group())
end

function Linear4bit:__tostring()
  local o = self.settings
  local shard = rawget(self, "storage_shard")
  return string.format("Linear4bit(%d -> %d%s, %s%s, compute %s%s)", self.in_features, self.out_features,
                       self.bias and "" or ", no bias", o.quant_type, o.double_quant and ", double quant" or "",
                       self.compute_dtype, shard and string.format(", storage sharded over %d", shard.ranks) or "")
end

return Linear4bit
