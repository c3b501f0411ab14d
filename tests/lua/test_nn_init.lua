-- nn.init: each initialiser fills its tensor in place, under no_grad, with
-- PyTorch's distribution (checked by its bounds and moments on large
-- tensors), and modules start with PyTorch's default initialisation.
-- Gains and truncated-normal moments were printed by /usr/bin/python3:
--   torch.nn.init.calculate_gain(...); scipy.stats.truncnorm(a, b).std(), .mean()
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local nn = accel.nn
local init = nn.init

accel.set_seed(5)

local function mean(t) return t:mean():item() end
local function std(t) return ((t - t:mean()) ^ 2):mean():sqrt():item() end
local function absmax(t) return t:abs():max():item() end

-- calculate_gain(n) for linear, sigmoid, tanh, relu, selu, conv2d; leaky_relu with 0.2 and the default
check.near({ init.calculate_gain("linear"), init.calculate_gain("sigmoid"), init.calculate_gain("tanh"),
             init.calculate_gain("relu"), init.calculate_gain("selu"), init.calculate_gain("conv2d"),
             init.calculate_gain("leaky_relu", 0.2), init.calculate_gain("leaky_relu") },
           { 1, 1, 1.6666666666666667, 1.4142135623730951, 0.75, 1, 1.3867504905630728, 1.4141428569978354 }, 1e-12,
           "calculate_gain")
check.raises(function() init.calculate_gain("swish") end, "unknown nonlinearity", "swish")

local fan_in, fan_out = init.calculate_fans(accel.empty(6, 4, 3, 2))
check.equal(fan_in .. " " .. fan_out, "24 36", "fans: dims 2 and 1 times the receptive field")

-- In place, under no_grad: a parameter stays a leaf and the same tensor comes back.
local p = accel.zeros(500, 400, { requires_grad = true })
check.truthy(init.uniform_(p, -2, 3) == p, "initialisers return their tensor")
check.truthy(p.is_leaf and p.requires_grad and p.grad == nil, "a parameter stays a trainable leaf")
check.truthy(p:min():item() >= -2 and p:max():item() < 3, "uniform_ within [a, b)")
check.near(mean(p), 0.5, 0.01, "uniform_ mean")
check.near(std(p), 5 / math.sqrt(12), 0.01, "uniform_ std")

init.normal_(p, 1, 2)
check.near(mean(p), 1, 0.01, "normal_ mean")
check.near(std(p), 2, 0.01, "normal_ std")
check.near(init.constant_(accel.empty(3), 0.5), { 0.5, 0.5, 0.5 }, 0, "constant_")
check.near(init.zeros_(accel.ones(2)), { 0, 0 }, 0, "zeros_")
check.near(init.ones_(accel.zeros(2)), { 1, 1 }, 0, "ones_")
check.near(init.eye_(accel.empty(2, 3)), { { 1, 0, 0 }, { 0, 1, 0 } }, 0, "eye_")

local w = accel.empty(300, 200)
local bound = math.sqrt(6 / 500)
init.xavier_uniform_(w)
check.truthy(absmax(w) <= bound and absmax(w) > 0.99 * bound, "xavier_uniform_ bound sqrt(6 / (fan_in + fan_out))")
init.xavier_uniform_(w, 2)
check.near(std(w), 2 * bound / math.sqrt(3), 0.02, "xavier_uniform_ with a gain")
init.xavier_normal_(w)
check.near(std(w), math.sqrt(2 / 500), 0.02, "xavier_normal_ std")

local k = accel.empty(400, 100, 3)           -- fan_in 300, fan_out 1200
init.kaiming_uniform_(k)
check.near(absmax(k), math.sqrt(3) * init.calculate_gain("leaky_relu", 0) / math.sqrt(300), 0.01,
           "kaiming_uniform_ defaults: a = 0, fan_in, leaky_relu")
init.kaiming_uniform_(k, { a = math.sqrt(5) })
check.near(absmax(k), 1 / math.sqrt(300), 0.01, "kaiming_uniform_ with a = sqrt(5) is Linear's 1/sqrt(fan_in)")
init.kaiming_normal_(k, { mode = "fan_out", nonlinearity = "relu" })
check.near(std(k), math.sqrt(2 / 1200), 0.01, "kaiming_normal_ fan_out, relu")
check.near(mean(k), 0, 0.01, "kaiming_normal_ mean")
check.raises(function() init.kaiming_normal_(k, { mode = "fan_avg" }) end, "bad mode", "fan_avg")
check.raises(function() init.kaiming_normal_(k, { nonlinearity = "relu", alpha = 1 }) end, "typo", "alpha")
check.raises(function() init.xavier_uniform_(accel.empty(5)) end, "1-D tensor", "xavier_uniform_", "[5]")
check.raises(function() init.uniform_(3) end, "not a tensor", "uniform_", "number")

-- truncnorm(-2, 2).std() and truncnorm(-0.5, 1.5).mean()
local t = init.trunc_normal_(accel.empty(200000))
check.truthy(t:min():item() >= -2 and t:max():item() <= 2, "trunc_normal_ within [a, b]")
check.near(std(t), 0.8796256610342398, 0.01, "trunc_normal_ has the truncated normal's std")
init.trunc_normal_(t, 0, 1, -0.5, 1.5)
check.near(mean(t), 0.35627288417705977, 0.01, "trunc_normal_ on an asymmetric interval")
init.trunc_normal_(t, 3, 0.5, 2.5, 3.5)
check.truthy(t:min():item() >= 2.5 and t:max():item() <= 3.5, "trunc_normal_ with mean and std")
check.raises(function() init.trunc_normal_(t, 0, 1, 1, -1) end, "a > b", "a < b")

local wide = init.orthogonal_(accel.empty(4, 3, 3))
local rows = wide:view(4, 9)
check.near(rows:matmul(rows:t()), accel.eye(4), 1e-5, "orthogonal_: orthonormal rows when rows < cols")
local tall = init.orthogonal_(accel.empty(9, 4), 2)
check.near(tall:t():matmul(tall), accel.eye(4) * 4, 1e-5, "orthogonal_: orthonormal columns, times gain")

-- Modules start as PyTorch's do.
local lin = nn.Linear(300, 200)
check.truthy(absmax(lin.weight) <= 1 / math.sqrt(300) and absmax(lin.bias) <= 1 / math.sqrt(300),
             "Linear: U(-1/sqrt(in), 1/sqrt(in))")
check.near(std(lin.weight), 1 / math.sqrt(300) / math.sqrt(3), 0.01, "Linear weight is uniform over the bound")
local conv = nn.Conv2d(16, 32, 3)
check.near(absmax(conv.weight), 1 / math.sqrt(16 * 9), 0.01, "Conv2d: bound 1/sqrt(fan_in)")
local bil = nn.Bilinear(50, 7, 30)
check.near(absmax(bil.weight), 1 / math.sqrt(50), 0.01, "Bilinear: bound 1/sqrt(in1_features)")
local bn = nn.BatchNorm2d(4)
check.near(accel.cat({ bn.weight, bn.bias, bn.running_mean, bn.running_var }), { 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0,
                                                                                 1, 1, 1, 1 }, 0, "BatchNorm: ones, zeros")
check.equal(bn.num_batches_tracked.dtype, accel.int64, "num_batches_tracked is an int64 counter")
local mha = nn.MultiheadAttention(64, 4)
check.near(absmax(mha.in_proj_weight), math.sqrt(6 / (64 + 192)), 0.01, "MultiheadAttention: Xavier in_proj_weight")

-- model:apply(fn) for a custom initialisation
local model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
model:apply(function(m)
  if m.__name == "Linear" then
    init.kaiming_normal_(m.weight, { nonlinearity = "relu" })
    init.zeros_(m.bias)
  end
end)
check.near(model[1].bias, accel.zeros(8), 0, "apply reaches every Linear")
check.near(model[3].bias, accel.zeros(2), 0, "apply reaches every Linear")

check.done("test_nn_init")
