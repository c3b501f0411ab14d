-- optim.RMSprop and optim.Adagrad from Lua: options (flags as booleans),
-- parameter groups and the same numbers as PyTorch 1.13. The expected lists
-- come from the harness in tests/engine/test_optim_rmsprop_adagrad.cpp
-- (/usr/bin/python3, python3-torch 1.13.1) for the call in each comment.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local optim = accel.optim

local f32 = { dtype = accel.float32 }

-- The harness: two parameters pulled towards targets, gradient 2 (p - t) + 0.1 k.
local function problem()
  local p0 = accel.tensor({ { 0.5, -1.2, 0.3 }, { 2.0, -0.7, 1.1 } }, f32):requires_grad_()
  local p1 = accel.tensor({ 0.1, -0.4, 0.9, 1.5 }, f32):requires_grad_()
  local t0 = accel.tensor({ { 0.2, 0.1, -0.3 }, { 1.0, 0.4, -0.5 } }, f32)
  local t1 = accel.tensor({ 0.3, 0.2, -0.1, 0.7 }, f32)
  local function run(opt, steps)
    for k = 0, steps - 1 do
      p0.grad = (p0:detach() - t0) * 2 + 0.1 * k
      p1.grad = (p1:detach() - t1) * 2 + 0.1 * k
      opt:step()
    end
    return accel.cat({ p0:detach():flatten(), p1:detach() })
  end
  return p0, p1, run
end

do -- O.RMSprop([a, b], lr=0.01, alpha=0.9, eps=1e-6, weight_decay=0.1, momentum=0.8, centered=True), 5 steps
  local p0, p1, run = problem()
  local opt = optim.RMSprop({ p0, p1 }, { lr = 0.01, alpha = 0.9, eps = 1e-6, weight_decay = 0.1, momentum = 0.8,
                                           centered = true })
  check.near(run(opt, 5), { 0.201076195, -0.914703548, 0.000291831733, 1.69995296, -0.418225825, 0.799819171,
                            0.229837105, -0.138878882, 0.599974632, 1.20005977 }, 1e-6, "centered RMSprop")
  check.equal(opt:name(), "RMSprop", "name")
  check.equal(opt:option("centered"), 1, "flags read back as 0 or 1")
end

do -- O.Adagrad([{'params': [a]}, {'params': [b], 'lr': 0.01, 'lr_decay': 0.5}], lr=0.2), 4 steps
  local p0, p1, run = problem()
  local opt = optim.Adagrad({ { params = { p0 } }, { params = { p1 }, lr = 0.01, lr_decay = 0.5 } }, { lr = 0.2 })
  check.near(run(opt, 4), { 0.0944960266, -0.709281445, -0.185297698, 1.4837631, -0.224131197, 0.567604423,
                            0.116015956, -0.381292552, 0.880063713, 1.47998583 }, 1e-6, "Adagrad with groups")
  check.near(opt:option("lr_decay", 2), 0.5, 0, "per-group option")
  check.truthy(opt:state_dict()["state.1.sum"] ~= nil, "Adagrad's state holds the sum of squares")
end

do
  local p0, p1 = problem()
  check.raises(function() optim.RMSprop({ p0, p1 }, { betas = { 0.9, 0.99 } }) end, "unknown option",
               "RMSprop has no option 'beta1'")
  check.raises(function() optim.Adagrad({ p0 }, { lr = -1 }) end, "negative lr", "invalid lr -1")
end

check.done("test_optim_rmsprop_adagrad")
