-- accel.MixedPrecisionPolicy: FSDP2's MixedPrecisionPolicy, given as
-- FullyShardedDataParallelPlugin{mixed_precision_policy = ...} (a made
-- policy or a plain table of the same keys):
--   param_dtype  the dtype the gathered parameters have, so the dtype
--     forward and backward compute in (nil: the parameters' own). The
--     shards the optimizer steps keep the parameters' dtype; each rank casts
--     its shard to param_dtype before the all-gather.
--   reduce_dtype the dtype gradients are reduce-scattered in (nil:
--     param_dtype); they land in the shards' gradients in the shards' dtype.
--   output_dtype the dtype the floating outputs of the model's forward
--     are cast to (nil: left as computed).
--   cast_forward_inputs whether the floating inputs of each sharded unit's
--     forward are cast to param_dtype (default true, as FSDP2's).
-- Dtypes are accel.float32, bfloat16, float16 or float64 (their names).
-- The engine side is engine/parallel/mixed_precision_policy.h.
local args = require("accel.util.args")
local tensor_tree = require("accel.util.tensor_tree")

local Policy = {}
Policy.__index = Policy

local where = "accel.MixedPrecisionPolicy"
local floating = { float32 = true, bfloat16 = true, float16 = true, float64 = true }
local dtype_keys = { "param_dtype", "reduce_dtype", "output_dtype" }

local function new(_, options, caller)
  caller = caller or where
  local o = args.options(caller, options, {
    param_dtype = args.NONE, reduce_dtype = args.NONE, output_dtype = args.NONE, cast_forward_inputs = true,
  }, { cast_forward_inputs = "boolean" })
  for _, key in ipairs(dtype_keys) do
    local dtype = o[key]
    if dtype ~= nil and not floating[dtype] then
      args.error(string.format("%s: %s must be a floating dtype (accel.float32, bfloat16, float16, float64), got %s",
                               caller, key, tostring(dtype)))
    end
  end
  return setmetatable(o, Policy)
end

function Policy.is(value)
  return type(value) == "table" and getmetatable(value) == Policy
end

-- A policy from a plugin's mixed_precision_policy option: a made one as it
-- is, a plain table checked as the constructor checks it (errors name
-- `caller`'s option).
function Policy.from(value, caller)
  if Policy.is(value) then return value end
  if type(value) ~= "table" then
    args.error(string.format("%s: mixed_precision_policy must be a table (param_dtype, reduce_dtype, output_dtype, "
                             .. "cast_forward_inputs) or accel.MixedPrecisionPolicy{...}, got %s (a %s)", caller,
                             tostring(value), type(value)))
  end
  return new(nil, value, caller .. ": mixed_precision_policy")
end

-- What the engine's ShardedModel takes (engine/parallel/mixed_precision_policy.h).
function Policy:engine_policy()
  return { param_dtype = self.param_dtype, reduce_dtype = self.reduce_dtype }
end

local function cast_floating(values, n, dtype)
  for i = 1, n do
    values[i] = tensor_tree.map(values[i], function(t)
      if t:is_floating_point() and t.dtype ~= dtype then return t:to(dtype) end
      return t
    end)
  end
end

-- Around a sharded unit's forward: its arguments (`values`, `n` of them)
-- cast to param_dtype in place, or (the root's) its results to output_dtype.
function Policy:cast_inputs(values, n)
  if self.param_dtype and self.cast_forward_inputs then cast_floating(values, n, self.param_dtype) end
end
function Policy:cast_outputs(values, n)
  if self.output_dtype then cast_floating(values, n, self.output_dtype) end
end

function Policy:__tostring()
  local parts = {}
  for _, key in ipairs(dtype_keys) do parts[#parts + 1] = key .. "=" .. tostring(self[key] or "nil") end
  parts[#parts + 1] = "cast_forward_inputs=" .. tostring(self.cast_forward_inputs)
  return "MixedPrecisionPolicy(" .. table.concat(parts, ", ") .. ")"
end

return setmetatable(Policy, { __call = new })
