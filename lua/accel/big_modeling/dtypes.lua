-- What big-model loading needs to know of dtypes: their sizes, and which
-- ones a `dtype` option converts (floating ones only, as Accelerate: integer
-- and boolean buffers such as positions or masks keep their dtype), and
-- what a checkpoint tensor loads as into a model tensor.
local args = require("accel.util.args")

local dtypes = {}

local element_sizes = {
  float64 = 8, float32 = 4, float16 = 2, bfloat16 = 2,
  int64 = 8, int32 = 4, int16 = 2, int8 = 1, uint8 = 1, bool = 1,
}
local floating = { float64 = true, float32 = true, float16 = true, bfloat16 = true }

function dtypes.element_size(dtype)
  return element_sizes[dtype] or error("no known size for dtype " .. tostring(dtype), 2)
end

function dtypes.check(where, dtype)
  if not floating[dtype] then
    args.error(string.format("%s: dtype must be a floating dtype (accel.float32, float16, bfloat16, float64), got %s",
                             where, tostring(dtype)))
  end
end

-- The dtype a tensor of `own` dtype has after loading with `wanted` (nil: no conversion).
function dtypes.converted(own, wanted)
  if wanted ~= nil and floating[own] then return wanted end
  return own
end

-- The dtype a checkpoint tensor of dtype `saved` loads as into a model
-- tensor of dtype `model`, given the `wanted` option (nil: none), as
-- Accelerate loads: a floating tensor takes `wanted`, else the model's
-- dtype (an F64 bias lands in a float32 model as float32); an integer or
-- boolean one keeps its own. Nil and the reason when one side is floating
-- and the other is not: no conversion keeps such values.
function dtypes.loaded(saved, model, wanted)
  if floating[saved] ~= floating[model] then
    return nil, string.format("is %s in the checkpoint but %s in the model (a %s tensor cannot become a %s one)",
                              saved, model, floating[saved] and "floating" or "non-floating",
                              floating[model] and "floating" or "non-floating")
  end
  if floating[saved] then return wanted or model end
  return saved
end

return dtypes
