-- Random functions draw from the engine's default generator, which
-- accel.set_seed seeds: the same seed gives the same draws, and the same
-- draws as PyTorch 1.13 after torch.manual_seed(7) (values recorded with
-- e.g. `torch.manual_seed(7); torch.multinomial(torch.tensor([.1, .2, .3, .4]), 4)`).
-- Indices drawn (randperm, multinomial) are 1-based.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")

local function seeded(fn)
  accel.set_seed(7)
  return fn()
end

check.near(seeded(function() return accel.randn(4) end),
           { -0.1467950940132141, 0.7861412763595581, 0.9468216300010681, -1.1143440008163452 }, 1e-7, "randn")
check.near(seeded(function() return accel.rand(3) end),
           { 0.5349225401878357, 0.19880318641662598, 0.6592116951942444 }, 1e-7, "rand")
check.near(seeded(function() return accel.empty(3):normal_(2, 0.5) end),
           { 1.9266024827957153, 2.393070697784424, 2.4734108448028564 }, 1e-7, "normal_(mean, std)")
check.near(seeded(function() return accel.empty(3):uniform_(-1, 1) end),
           { 0.06984508037567139, -0.602393627166748, 0.31842339038848877 }, 1e-7, "uniform_(from, to)")
check.near(seeded(function() return accel.empty(3):exponential_(2) end),
           { 0.1638219654560089, 0.159891739487648, 0.9905877113342285 }, 1e-7, "exponential_")
check.near(seeded(function() return accel.randint(1, 10, { 5 }) end), { 1, 5, 8, 3, 5 }, 0,
           "randint: low included, high excluded")
-- torch.randperm(6) gives [3, 0, 1, 5, 2, 4]; accel's is 1-based.
check.near(seeded(function() return accel.randperm(6) end), { 4, 1, 2, 6, 3, 5 }, 0, "randperm is 1-based")
-- torch.multinomial(...) gives [1, 3, 0, 2]
check.near(seeded(function() return accel.tensor({ 0.1, 0.2, 0.3, 0.4 }):multinomial(4) end), { 2, 4, 1, 3 }, 0,
           "multinomial without replacement, 1-based")
check.near(seeded(function()
  return accel.multinomial(accel.tensor({ { 0.0, 1.0, 0.0 }, { 0.5, 0.0, 0.5 } }), 5, true)
end), { { 2, 2, 2, 2, 2 }, { 3, 1, 3, 3, 3 } }, 0, "multinomial with replacement, per row")
check.near(seeded(function() return accel.tensor({ 0.1, 0.5, 0.9, 0.5, 0.5 }):bernoulli() end),
           { 0, 1, 1, 0, 1 }, 0, "bernoulli of probabilities")
check.near(seeded(function() return accel.zeros(5):bernoulli(0.5) end), { 1, 1, 0, 0, 0 }, 0, "bernoulli(p)")
check.near(seeded(function() return accel.empty(6):bernoulli_(0.3) end), { 1, 1, 0, 0, 0, 0 }, 0, "bernoulli_(p)")
check.near(seeded(function() return accel.nn.functional.dropout(accel.ones(8), 0.5) end),
           { 2, 2, 0, 0, 0, 0, 2, 0 }, 0, "dropout draws from the same generator")

-- Seeding repeats draws; without reseeding they differ.
accel.set_seed(11)
local first = accel.randn(5)
local second = accel.randn(5)
accel.set_seed(11)
check.near(accel.randn(5), first, 0, "set_seed repeats the draws")
check.truthy(not accel.equal(first, second), "later draws differ")

-- Statistics of larger draws (loose bounds: these hold for any seed).
accel.set_seed(3)
local n = accel.empty(20000):normal_(1, 2)
check.near(n:mean(), 1, 0.1, "normal_ mean")
check.near(n:std(), 2, 0.05, "normal_ std")
local u = accel.empty(20000):uniform_(2, 4)
check.truthy(u:min():item() >= 2 and u:max():item() < 4, "uniform_ stays in [from, to)")
local perm = accel.randperm(100):sort()
check.near(perm, accel.arange(1, 101), 0, "randperm is a permutation of 1..n")
local counts = accel.zeros(3)
counts:index_add_(1, accel.tensor({ 0.2, 0.3, 0.5 }):multinomial(10000, true), accel.ones(10000))
check.near(counts / 10000, { 0.2, 0.3, 0.5 }, 0.1, "multinomial follows the weights")
local kept = accel.ones(10000):bernoulli_(accel.full({ 10000 }, 0.25)):mean():item()
check.near(kept, 0.25, 0.1, "bernoulli_ with a tensor of probabilities")

-- Bad calls name the function and the value.
check.raises(function() return accel.tensor({ 0.5, 0.5 }):multinomial(3) end, "too many draws",
             "accel.multinomial", "float32[2], 3")
check.raises(function() return accel.tensor({ -0.5, 1.5 }):multinomial(1) end, "negative weight",
             "accel.multinomial")
check.raises(function() return accel.randint(5, 1, { 2 }) end, "empty range", "accel.randint", "5, 1")
check.raises(function() return accel.empty(2):uniform_("a") end, "wrong argument", "accel.uniform_", "string 'a'")
check.raises(function() return accel.tensor({ 2.5 }):bernoulli() end, "probability above 1", "accel.bernoulli")

check.done("test_tensor_random")
