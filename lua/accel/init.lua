-- The accel module: tensors from the native core, plus nn, optim, data and
-- the Accelerator. Recipes get it as the global `accel` or via require.
local core = require("accel.core")

local accel = {}

for name, fn in pairs(core) do
  if type(fn) == "function" then accel[name] = fn end
end

-- dtypes are their names; t.dtype compares equal to them.
for _, name in ipairs({ "float32", "float64", "bfloat16", "float16", "int64", "int32",
                        "int16", "int8", "uint8", "bool" }) do
  accel[name] = name
end
accel.float, accel.double, accel.half, accel.long = "float32", "float64", "float16", "int64"

local seed_state = { seed = 0 }

-- Seeds every generator a recipe uses: the engine's and Lua's math.random.
function accel.set_seed(seed)
  seed_state.seed = seed
  core.manual_seed(seed)
  math.randomseed(seed)
end

-- The seed data loaders shuffle from when they are not given one.
function accel.initial_seed()
  return seed_state.seed
end

accel.nn = require("accel.nn")
accel.optim = require("accel.optim")
accel.data = require("accel.data")
accel.Accelerator = require("accel.accelerator")

return accel
