-- math.random is the engine's saveable generator with Lua 5.1's semantics,
-- accel.set_seed seeds it, and a checkpoint restores it together with the
-- engine's generator (randn, dropout).
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")

-- Lua 5.1 semantics.
math.randomseed(1)
local low, high = 1, 0
for _ = 1, 2000 do
  local r = math.random()
  low, high = math.min(low, r), math.max(high, r)
end
check.truthy(low >= 0 and high < 1 and low < 0.01 and high > 0.99, "math.random() covers [0, 1)")
local hits = {}
for _ = 1, 600 do
  local k = math.random(6)
  check.truthy(k % 1 == 0 and k >= 1 and k <= 6, "math.random(6) is an integer in [1, 6]")
  hits[k] = true
end
check.equal(#hits, 6, "every face of math.random(6) comes up")
for _ = 1, 200 do
  local k = math.random(-2, 2)
  check.truthy(k % 1 == 0 and k >= -2 and k <= 2, "math.random(-2, 2) is an integer in [-2, 2]")
end
check.equal(math.random(3, 3), 3, "a one-value interval")
for _ = 1, 100 do check.truthy(math.random(3.9) <= 3, "m is truncated to an integer") end
check.raises(function() math.random(0) end, "math.random(0)", "interval is empty")
check.raises(function() math.random(5, 1) end, "math.random(5, 1)", "interval is empty")
check.raises(function() math.random(1, 2, 3) end, "three arguments", "wrong number of arguments")
check.raises(function() math.random("x") end, "a string", "number expected")

local function draws(n)
  local out = {}
  for i = 1, n do out[i] = math.random() end
  return out
end

math.randomseed(42)
local a = draws(5)
math.randomseed(42)
check.near(draws(5), a, 0, "the same seed gives the same sequence")
math.randomseed(43)
check.truthy(draws(1)[1] ~= a[1], "another seed another sequence")
accel.set_seed(42)
check.near(draws(5), a, 0, "accel.set_seed seeds math.random")

-- A checkpoint restores both generators.
local dir = os.tmpname()
os.remove(dir)
local acc = accel.Accelerator{}
accel.set_seed(7)
draws(3)
accel.randn(4)
acc:save_state(dir)
local lua_after = draws(4)
local randn_after = accel.randn(6)
local dropout_after = accel.nn.functional.dropout(accel.ones(50), 0.5, true)
draws(10)
accel.randn(3)
acc:load_state(dir)
check.near(draws(4), lua_after, 0, "math.random continues from the checkpoint")
check.near(accel.randn(6), randn_after, 0, "the engine's generator continues from the checkpoint")
check.near(accel.nn.functional.dropout(accel.ones(50), 0.5, true), dropout_after, 0,
           "dropout masks continue from the checkpoint")
require("accel.core").formats.remove_folder(dir)
check.done("checkpoint rng")
