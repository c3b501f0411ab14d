-- Optimizers' `foreach` and `fused` options (PyTorch's): how a step runs,
-- never what it computes. The foreach path equals the for-loop bit for bit.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local nn, optim = accel.nn, accel.optim

local function train(options)
  accel.set_seed(3)
  local model = nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 2))
  local opt = optim.AdamW(model:parameters(), options)
  local x, y = accel.randn(8, 6), accel.randn(8, 2)
  for _ = 1, 4 do
    nn.functional.mse_loss(model(x), y):backward()
    opt:step()
    opt:zero_grad()
  end
  return model:parameters(), opt
end

local loop_params, loop = train({ lr = 0.01, foreach = false })
local foreach_params, foreach = train({ lr = 0.01, foreach = true })
local _, default = train({ lr = 0.01 })
check.equal(loop:implementation(), "for-loop", "foreach = false")
check.equal(foreach:implementation(), "foreach", "foreach = true")
check.equal(default:implementation(), "auto", "neither: PyTorch's default (foreach on CUDA, else the for-loop)")
for i = 1, #loop_params do
  check.truthy(accel.equal(loop_params[i], foreach_params[i]), "parameter " .. i .. " equal bit for bit")
end

local params = nn.Linear(2, 2):parameters()
check.raises(function() optim.AdamW(params, { foreach = true, fused = true }) end, "both",
             "'foreach' and 'fused' cannot both be true")
check.raises(function() optim.RMSprop(params, { lr = 0.01, foreach = true }) end, "an optimizer without it",
             "RMSprop has no foreach implementation")
if not accel.cuda.is_built() then
  check.raises(function() optim.AdamW(params, { fused = true }) end, "fused in a build on LibTorch 1.13",
               "AdamW has no fused implementation", "LibTorch 2.x")
end

-- param_groups, as PyTorch's: each group's options read and write the optimizer's.
local net_a, net_b = nn.Linear(2, 2), nn.Linear(2, 2)
local grouped = optim.AdamW({ { params = net_a:parameters() }, { params = net_b:parameters(), lr = 0.5 } },
                            { lr = 0.01 })
check.equal(#grouped.param_groups, 2, "param_groups lists the groups")
check.near(grouped.param_groups[2].lr, 0.5, 1e-12, "a group's lr reads the optimizer's")
grouped.param_groups[1].lr = 0.25
check.near(grouped:option("lr", 1), 0.25, 1e-12, "param_groups[1].lr = x sets the optimizer's lr of group 1")
check.near(grouped:option("lr", 2), 0.5, 1e-12, "and leaves group 2's")
grouped:set_option("weight_decay", 0.125)
check.near(grouped.param_groups[2].weight_decay, 0.125, 1e-12, "set_option stays, seen through param_groups")
check.equal(#grouped.param_groups[1].params, 2, "a group's params are its tensors")
check.raises(function() grouped.param_groups[1].params = {} end, "params cannot be replaced", "cannot be replaced")
check.done("test_optim_implementation")
