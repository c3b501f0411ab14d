-- The generators a recipe draws from: the engine's (randn, dropout,
-- randperm...) and Lua's math.random. The seed a recipe set (which data
-- loaders shuffle from) lives here, so that loaders and samplers need not
-- require the whole accel module. The states can be read, restored and
-- copied from rank 0 to every rank.
local core = require("accel.core")
local args = require("accel.util.args")

local dist = core.dist
local random = {}

local recipe_seed = { value = 0 }  -- the seed a recipe last set

-- Seeds every generator a recipe uses: the engine's and Lua's math.random.
-- With {device_specific = true} each rank adds its rank to the seed, for
-- randomness that should differ between ranks (data augmentation, say).
-- Data loaders keep shuffling from the seed given, the same on every rank.
function random.set_seed(seed, options)
  recipe_seed.value = seed
  local own = seed
  if options and options.device_specific then own = seed + core.dist.state().rank end
  core.manual_seed(own)
  math.randomseed(own)
end

-- The seed data loaders shuffle from when they are not given one.
function random.initial_seed()
  return recipe_seed.value
end

-- The engine's generator state, a uint8 tensor (as torch.get_rng_state).
function random.get()
  return core.formats.generator_state()
end

function random.set(state)
  if type(state) ~= "userdata" or state.dtype ~= "uint8" or state:dim() ~= 1 then
    args.error("accel.set_rng_state: expected the uint8 tensor accel.get_rng_state() returns, got a "
               .. (type(state) == "userdata" and tostring(state.dtype) .. " tensor" or type(state)))
  end
  core.formats.set_generator_state(state)
end

-- math.random's state, an int64 tensor of 4 words.
function random.get_math_random()
  return core.math_random_state()
end

function random.set_math_random(state)
  if type(state) ~= "userdata" then
    args.error("accel.set_math_random_state: expected the int64 tensor accel.get_math_random_state() returns, got a "
               .. type(state))
  end
  core.set_math_random_state(state)
end

-- Every rank takes rank 0's states, so random draws agree from here on.
function random.synchronize(world)
  if world.size == 1 then return end
  local generator = random.get():contiguous()
  dist.broadcast(generator, 0)
  random.set(generator)
  local words = random.get_math_random():contiguous()
  dist.broadcast(words, 0)
  random.set_math_random(words)
end

return random
