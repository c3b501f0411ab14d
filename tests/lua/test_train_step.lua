-- Accelerator:train_step: the step as a function. Without cuda_graphs it is
-- the function itself; with cuda_graphs on a machine that cannot capture (here:
-- the CPU), every call runs eagerly, said once, with eager's results.
-- The capture itself is tested on a GPU (tests/gpu/cuda_graphs.lua).
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local nn, optim, F = accel.nn, accel.optim, accel.nn.functional

local function train(options)
  accel.set_seed(5)
  local acc = accel.Accelerator(options)
  local model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
  local opt = optim.AdamW(model:parameters(), { lr = 0.01 })
  local sched = optim.lr_scheduler.linear(opt, { warmup = 2, total = 10 })
  model, opt, sched = acc:prepare(model, opt, sched)
  local fn = function(x, y)
    local loss = F.mse_loss(model(x), y)
    acc:backward(loss)
    opt:step(); sched:step(); opt:zero_grad()
    return loss
  end
  local step = acc:train_step(fn)
  local losses = {}
  for i = 1, 6 do
    local x, y = accel.randn(5, 4), accel.randn(5, 1)
    losses[i] = step(x, y):item()
  end
  return losses, step == fn, opt
end

local eager, same = train({ cpu = true })
check.truthy(same, "without cuda_graphs train_step returns the function itself")
local graphed, same_with, opt = train({ cpu = true, cuda_graphs = true })
check.truthy(not same_with, "with cuda_graphs it is a step object")
check.near(graphed, eager, 0, "on the CPU the steps run eagerly, with eager's losses")
check.equal(opt.updates, 6, "every step counted its update")

check.raises(function() accel.Accelerator{ cuda_graphs = { warmup = 0 } } end, "a warm-up of 0",
             "warmup must be a positive integer")
check.raises(function() accel.Accelerator{ cuda_graphs = { wramup = 2 } } end, "a misspelt setting",
             "unknown option 'wramup'")
check.raises(function() accel.Accelerator{ cuda_graphs = "yes" } end, "not a boolean or a table",
             "cuda_graphs")
check.raises(function() accel.Accelerator{ cpu = true }:train_step(42) end, "not a function",
             "expected the step as a function")
check.done("test_train_step")
