-- Rotary position embeddings (RoPE), as the Llama family of checkpoints
-- uses them:
--   local rope = nn.RotaryEmbedding(head_dim, {base = 10000, scaling = {...},
--                                              partial_rotary_factor = 1,
--                                              max_position_embeddings = n})
--   local cos, sin = rope(position_ids, dtype)      -- (B, T, rotary dim)
--   q, k = nn.RotaryEmbedding.apply(q, k, cos, sin) -- q, k: (B, heads, T, head_dim)
-- `scaling` is config.json's rope_scaling (rope_type, or type, "default",
-- "linear" with factor, "llama3" with factor, low_freq_factor,
-- high_freq_factor, original_max_position_embeddings, or "yarn" with
-- original_max_position_embeddings and optionally factor (else
-- max_position_embeddings over it), attention_factor, mscale,
-- mscale_all_dim, beta_fast, beta_slow, truncate); the frequencies are
-- computed in float32 by the same operations as transformers', so angles
-- agree to the bit. YaRN also scales cos and sin by its attention factor. The module holds no state dict entries: its frequencies
-- are derived from the configuration, made on the device of the positions
-- at first use.
local core = require("accel.core")
local Module = require("accel.nn.module")
local args = require("accel.util.args")

local RotaryEmbedding = Module:extend("RotaryEmbedding")

local function scaling_number(scaling, key, where)
  local v = scaling[key]
  if type(v) ~= "number" then
    args.error(string.format("%s: rope_scaling of type '%s' needs a number '%s', got %s", where,
                             tostring(scaling.rope_type or scaling.type), key, tostring(v)))
  end
  return v
end

-- The numbers a scaling type needs, checked: the type and {key = number};
-- and those it may have.
local needs = {
  default = {},
  linear = { "factor" },
  llama3 = { "factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings" },
  yarn = { "original_max_position_embeddings" },
}
local may_have = {
  yarn = { "factor", "attention_factor", "mscale", "mscale_all_dim", "beta_fast", "beta_slow" },
}

local function scaling_settings(scaling, where)
  local kind = scaling and (scaling.rope_type or scaling.type) or "default"
  if not needs[kind] then
    args.error(string.format("%s: rope_scaling type '%s' is not supported (supported: default, linear, llama3, "
                             .. "yarn)", where, tostring(kind)))
  end
  local numbers = {}
  for _, key in ipairs(needs[kind]) do numbers[key] = scaling_number(scaling, key, where) end
  for _, key in ipairs(may_have[kind] or {}) do
    if scaling[key] ~= nil then numbers[key] = scaling_number(scaling, key, where) end
  end
  return kind, numbers
end

-- YaRN (transformers' _compute_yarn_parameters): frequencies interpolated
-- by `factor` below a ramp over the dims whose rotations in the original
-- context fall between beta_slow and beta_fast, kept above it; returns them
-- and the attention factor that scales cos and sin. pos_freqs: base ^ (2i /
-- dim), the default frequencies' reciprocals.
local function yarn(dim, base, pos_freqs, n, scaling, max_positions, where)
  local old_context = n.original_max_position_embeddings
  local factor = n.factor
  if not factor then
    if not max_positions then
      args.error(where .. ": rope_scaling of type 'yarn' without 'factor' needs max_position_embeddings")
    end
    factor = max_positions / old_context
  end
  local function mscale(scale, m)
    if scale <= 1 then return 1 end
    return 0.1 * (m or 1) * math.log(scale) + 1
  end
  local attention_factor = n.attention_factor
  if not attention_factor then
    if n.mscale and n.mscale ~= 0 and n.mscale_all_dim and n.mscale_all_dim ~= 0 then
      attention_factor = mscale(factor, n.mscale) / mscale(factor, n.mscale_all_dim)
    else
      attention_factor = mscale(factor)
    end
  end
  local beta_fast = (n.beta_fast and n.beta_fast ~= 0) and n.beta_fast or 32
  local beta_slow = (n.beta_slow and n.beta_slow ~= 0) and n.beta_slow or 1
  local function correction_dim(rotations)
    return dim * math.log(old_context / (rotations * 2 * math.pi)) / (2 * math.log(base))
  end
  local low, high = correction_dim(beta_fast), correction_dim(beta_slow)
  if scaling.truncate ~= false then low, high = math.floor(low), math.ceil(high) end
  low, high = math.max(low, 0), math.min(high, dim - 1)
  if low == high then high = high + 0.001 end
  local extrapolation, interpolation = pos_freqs:reciprocal(), (pos_freqs * factor):reciprocal()
  local ramp = ((core.arange(0, dim / 2, { dtype = "int64" }):float() - low) / (high - low)):clamp(0, 1)
  local keep = ramp:neg() + 1  -- the share of each dim's extrapolated frequency
  return interpolation * (keep:neg() + 1) + extrapolation * keep, attention_factor
end

-- inv_freq (float32, dim / 2) for the scaling, made on the creation device,
-- and the factor cos and sin are scaled by (1 but for YaRN).
local function inverse_frequencies(dim, base, scaling, max_positions, where)
  local exponents = core.arange(0, dim, 2, { dtype = "int64" }):float() / dim
  local pos_freqs = core.full({ dim / 2 }, base) ^ exponents
  local inv_freq = pos_freqs:reciprocal()
  local kind, n = scaling_settings(scaling, where)
  if kind == "yarn" then return yarn(dim, base, pos_freqs, n, scaling, max_positions, where) end
  if kind == "linear" then return inv_freq / n.factor, 1 end
  if kind == "llama3" then
    local factor, low, high = n.factor, n.low_freq_factor, n.high_freq_factor
    local old_context = n.original_max_position_embeddings
    local low_freq_wavelen, high_freq_wavelen = old_context / low, old_context / high
    local wavelen = inv_freq:reciprocal() * (2 * math.pi)
    local scaled = core.where(wavelen:gt(low_freq_wavelen), inv_freq / factor, inv_freq)
    local smooth = (wavelen:reciprocal() * old_context - low) / (high - low)
    local smoothed = (smooth:neg() + 1) * scaled / factor + smooth * scaled
    local medium = wavelen:lt(high_freq_wavelen):logical_not():logical_and(wavelen:gt(low_freq_wavelen):logical_not())
    return core.where(medium, smoothed, scaled), 1
  end
  return inv_freq, 1
end

function RotaryEmbedding:init(head_dim, options)
  args.positive_integer("nn.RotaryEmbedding", "head_dim", head_dim)
  local o = args.options("nn.RotaryEmbedding", options, { base = 10000, scaling = args.NONE, partial_rotary_factor = 1,
                                                          max_position_embeddings = args.NONE },
                         { base = "number", scaling = "table", partial_rotary_factor = "number",
                           max_position_embeddings = "number" })
  local dim = math.floor(head_dim * o.partial_rotary_factor)
  if dim < 2 or dim % 2 ~= 0 then
    args.error(string.format("nn.RotaryEmbedding: the rotary dim (head_dim %d x partial_rotary_factor %g = %d) "
                             .. "must be even and at least 2", head_dim, o.partial_rotary_factor, dim))
  end
  self.head_dim, self.dim, self.base = head_dim, dim, o.base
  -- Plain fields (rawset): not parameters, and not on the meta device under init_empty_weights.
  rawset(self, "scaling", o.scaling)
  rawset(self, "max_positions", o.max_position_embeddings)
  rawset(self, "inv_freq_on", {})
  scaling_settings(o.scaling, "nn.RotaryEmbedding")  -- refuses a bad scaling now, not at the first forward
end

-- position_ids: integer (B, T) -> cos, sin of shape (B, T, dim) in `dtype`
-- (default float32), computed in float32.
function RotaryEmbedding:forward(position_ids, dtype)
  local device = position_ids.device
  local inv_freq = self.inv_freq_on[device]
  if not inv_freq then
    local attention_factor
    inv_freq, attention_factor = inverse_frequencies(self.dim, self.base, self.scaling, self.max_positions,
                                                     "nn.RotaryEmbedding")
    inv_freq = inv_freq:to(device)
    self.inv_freq_on[device] = inv_freq
    rawset(self, "attention_factor", attention_factor)
  end
  local freqs = position_ids:float():unsqueeze(-1) * inv_freq
  local angles = core.cat({ freqs, freqs }, -1)
  local cos, sin = angles:cos(), angles:sin()
  if self.attention_factor ~= 1 then cos, sin = cos * self.attention_factor, sin * self.attention_factor end
  if dtype and dtype ~= "float32" then cos, sin = cos:to(dtype), sin:to(dtype) end
  return cos, sin
end

-- The second half of the last dim negated and moved in front of the first.
local function rotate_half(x)
  local half = x:size(-1) / 2
  return core.cat({ x:narrow(-1, half + 1, half):neg(), x:narrow(-1, 1, half) }, -1)
end

local function rotate(x, cos, sin, dim)
  if dim == x:size(-1) then return x * cos + rotate_half(x) * sin end
  local head = x:narrow(-1, 1, dim)
  local rotated = head * cos + rotate_half(head) * sin
  return core.cat({ rotated, x:narrow(-1, dim + 1, x:size(-1) - dim) }, -1)
end

-- q and k (B, heads, T, head_dim) rotated by cos and sin (B, T, dim); with
-- a partial rotary factor only the first `dim` features turn.
function RotaryEmbedding.apply(q, k, cos, sin)
  cos, sin = cos:unsqueeze(2), sin:unsqueeze(2)
  local dim = cos:size(-1)
  return rotate(q, cos, sin, dim), rotate(k, cos, sin, dim)
end

function RotaryEmbedding:__tostring()
  local kind = self.scaling and (self.scaling.rope_type or self.scaling.type) or "default"
  return string.format("RotaryEmbedding(dim %d, base %g, %s)", self.dim, self.base, kind)
end

return RotaryEmbedding
