-- Learning-rate schedules against PyTorch 1.13's. Each expected table is
-- the lr of every param group (then the momentum, for one_cycle) after
-- construction and after each step, printed by /usr/bin/python3 with:
--
--   import torch, math
--   O, S = torch.optim, torch.optim.lr_scheduler
--   def run(make_opt, make_sched, steps, metrics=None):
--       p = torch.zeros(1, requires_grad=True); q = torch.zeros(1, requires_grad=True)
--       opt = make_opt([p, q]); s = make_sched(opt)
--       out = [[g['lr'] for g in opt.param_groups]]
--       for k in range(steps):
--           opt.step()
--           s.step(metrics[k]) if metrics else s.step()
--           out.append([g['lr'] for g in opt.param_groups])
--       print(out)
--   sgd1 = lambda ps: O.SGD(ps, lr=0.1)
--   sgd2 = lambda ps: O.SGD([{'params': [ps[0]]}, {'params': [ps[1]], 'lr': 0.05}], lr=0.1)
--   def oc(opt_maker, **kw):   # one_cycle: lrs, then momenta (beta1 for Adam)
--       ... same loop over kw['total_steps'] steps, appending
--       [g['lr'] ...] + [g['betas'][0] if 'betas' in g else g['momentum'] ...]
-- Each case's comment gives its call.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local optim = accel.optim
local sched = optim.lr_scheduler

local function param() return accel.zeros(1, { requires_grad = true }) end
local function sgd1() return optim.SGD({ param() }, { lr = 0.1 }) end
local function sgd2() return optim.SGD({ { params = { param() } }, { params = { param() }, lr = 0.05 } }, { lr = 0.1 }) end

local function lrs(opt, extra_option)
  local row = {}
  for g = 1, opt:num_param_groups() do row[#row + 1] = opt:option("lr", g) end
  if extra_option then
    for g = 1, opt:num_param_groups() do row[#row + 1] = opt:option(extra_option, g) end
  end
  return row
end

-- The lrs after construction and after each of `steps` steps.
local function run(opt, s, steps, metrics, extra_option)
  local rows = { lrs(opt, extra_option) }
  for k = 1, steps do
    opt:step()
    s:step(metrics and metrics[k])
    rows[#rows + 1] = lrs(opt, extra_option)
  end
  return rows
end

local tol = 1e-12

do -- StepLR(sgd2, step_size=3, gamma=0.5), 8 steps
  local opt = sgd2()
  local s = sched.step(opt, { step_size = 3, gamma = 0.5 })
  check.near(run(opt, s, 8), { { 0.1, 0.05 }, { 0.1, 0.05 }, { 0.1, 0.05 }, { 0.05, 0.025 }, { 0.05, 0.025 },
                               { 0.05, 0.025 }, { 0.025, 0.0125 }, { 0.025, 0.0125 }, { 0.025, 0.0125 } }, tol, "step")
  check.near(s:get_last_lr(), { 0.025, 0.0125 }, tol, "get_last_lr: one lr per group")
end

do -- MultiStepLR(sgd1, milestones=[2, 5, 5], gamma=0.1), 7 steps
  local opt = sgd1()
  local s = sched.multistep(opt, { milestones = { 2, 5, 5 }, gamma = 0.1 })
  check.near(run(opt, s, 7), { { 0.1 }, { 0.1 }, { 0.010000000000000002 }, { 0.010000000000000002 },
                               { 0.010000000000000002 }, { 0.00010000000000000005 }, { 0.00010000000000000005 },
                               { 0.00010000000000000005 } }, tol, "multistep (a repeated milestone counts twice)")
end

do -- ExponentialLR(sgd2, gamma=0.9), 5 steps
  local opt = sgd2()
  local s = sched.exponential(opt, { gamma = 0.9 })
  check.near(run(opt, s, 5), { { 0.1, 0.05 }, { 0.09000000000000001, 0.045000000000000005 },
                               { 0.08100000000000002, 0.04050000000000001 }, { 0.07290000000000002, 0.03645000000000001 },
                               { 0.06561000000000002, 0.03280500000000001 }, { 0.05904900000000002, 0.02952450000000001 } },
             tol, "exponential")
end

do -- CosineAnnealingLR(sgd2, T_max=6, eta_min=0.01), 6 steps
  local opt = sgd2()
  local s = sched.cosine(opt, { total = 6, min_lr = 0.01 })
  check.near(run(opt, s, 6), { { 0.1, 0.05 }, { 0.09397114317029975, 0.04732050807568878 }, { 0.07750000000000001, 0.04 },
                               { 0.055000000000000014, 0.03 }, { 0.032500000000000015, 0.020000000000000004 },
                               { 0.01602885682970026, 0.012679491924311226 }, { 0.01, 0.01 } },
             1e-10, "cosine without warmup is CosineAnnealingLR")
  s:step()
  check.near(lrs(opt), { 0.01, 0.01 }, tol, "cosine stays at min_lr after total")
end

do -- LambdaLR(sgd1, f), f(s) = s / 3 for s < 3, else 0.5 * (1 + cos(pi * min(1, (s - 3) / 7))), 12 steps
  local opt = sgd1()
  local s = sched.cosine(opt, { warmup = 3, total = 10 })
  check.near(run(opt, s, 12), { { 0 }, { 0.03333333333333333 }, { 0.06666666666666667 }, { 0.1 }, { 0.09504844339512096 },
                                { 0.08117449009293669 }, { 0.06112604669781572 }, { 0.03887395330218429 },
                                { 0.018825509907063328 }, { 0.004951556604879049 }, { 0 }, { 0 }, { 0 } },
             1e-10, "cosine with linear warmup")
end

do -- LinearLR(sgd2, start_factor=1.0, end_factor=0.2, total_iters=6), 8 steps
  local opt = sgd2()
  local s = sched.linear(opt, { total = 6, end_factor = 0.2 })
  check.near(run(opt, s, 8), { { 0.1, 0.05 }, { 0.08666666666666667, 0.043333333333333335 },
                               { 0.07333333333333333, 0.03666666666666667 }, { 0.06, 0.03 },
                               { 0.04666666666666666, 0.02333333333333333 }, { 0.033333333333333326, 0.016666666666666663 },
                               { 0.019999999999999993, 0.009999999999999997 }, { 0.019999999999999993, 0.009999999999999997 },
                               { 0.019999999999999993, 0.009999999999999997 } }, 1e-10, "linear decay is LinearLR")
end

do -- LinearLR(sgd1, start_factor=1/3, end_factor=1.0, total_iters=4), 6 steps
  local opt = sgd1()
  local s = sched.linear(opt, { warmup = 4, total = 4, start_factor = 1 / 3, end_factor = 1 })
  check.near(run(opt, s, 6), { { 0.03333333333333333 }, { 0.05 }, { 0.06666666666666668 }, { 0.08333333333333334 },
                               { 0.1 }, { 0.1 }, { 0.1 } }, 1e-10, "linear warmup is LinearLR's warmup")
end

do -- LambdaLR(sgd1, f), f(s) = s / 2 for s < 2, else max(0, (6 - s) / 4), 7 steps
  local opt = sgd1()
  local s = sched.linear(opt, { warmup = 2, total = 6 })
  check.near(run(opt, s, 7), { { 0 }, { 0.05 }, { 0.1 }, { 0.07500000000000001 }, { 0.05 }, { 0.025 }, { 0 }, { 0 } },
             1e-10, "linear warmup and decay to 0")
end

do -- LambdaLR(sgd2, [lambda s: 0.95 ** s, lambda s: 1 / (s + 1)]), 4 steps
  local opt = sgd2()
  local s = sched.lambda(opt, { function(k) return 0.95 ^ k end, function(k) return 1 / (k + 1) end })
  check.near(run(opt, s, 4), { { 0.1, 0.05 }, { 0.095, 0.025 }, { 0.09025, 0.016666666666666666 },
                               { 0.0857375, 0.0125 }, { 0.081450625, 0.010000000000000002 } }, tol, "lambda per group")
  local one = sgd1()
  sched.lambda(one, function(k) return 1 / (k + 2) end)
  check.near(lrs(one), { 0.05 }, tol, "lambda with one function sets lr at step 0")
end

do -- OneCycleLR(SGD(lr=0.1, momentum=0.9), max_lr=1.0, total_steps=10), 10 steps
  local opt = optim.SGD({ param(), param() }, { lr = 0.1, momentum = 0.9 })
  local s = sched.one_cycle(opt, { max_lr = 1.0, total = 10 })
  check.near(run(opt, s, 10, nil, "momentum"),
             { { 0.040000000000000036, 0.95 }, { 0.52, 0.8999999999999999 },
               { 1, 0.85 }, { 0.9504846320134737, 0.854951556604879 },
               { 0.8117456539497631, 0.8688255099070633 },
               { 0.6112620219362893, 0.8888739533021842 },
               { 0.38874197806371075, 0.9111260466978157 },
               { 0.18825834605023697, 0.9311744900929366 },
               { 0.049519367986526286, 0.945048443395121 },
               { 4e-06, 0.95 }, { 0.04951936798652623, 0.945048443395121 } },
             1e-10, "one_cycle with momentum")
  check.raises(function() s:step() end, "stepping past total", "tried to step 12 times", "total = 10")
end

do -- OneCycleLR(Adam(2 groups, lr=0.1), max_lr=[0.2, 0.4], total_steps=10, anneal_strategy='linear',
   --            three_phase=True, pct_start=0.25), 9 steps (the 10th makes the lr negative)
  local opt = optim.Adam({ { params = { param() } }, { params = { param() } } }, { lr = 0.1 })
  local s = sched.one_cycle(opt, { max_lr = { 0.2, 0.4 }, total = 10, anneal_strategy = "linear", three_phase = true,
                                   pct_start = 0.25 })
  check.near(run(opt, s, 9, nil, "beta1"),
             { { 0.008, 0.016, 0.95, 0.95 }, { 0.136, 0.272, 0.8833333333333333, 0.8833333333333333 },
               { 0.136, 0.272, 0.8833333333333333, 0.8833333333333333 },
               { 0.008000000000000007, 0.016000000000000014, 0.95, 0.95 },
               { 0.0066668000000000005, 0.013333600000000001, 0.95, 0.95 },
               { 0.005333600000000001, 0.010667200000000002, 0.95, 0.95 }, { 0.0040004, 0.0080008, 0.95, 0.95 },
               { 0.0026672000000000006, 0.005334400000000001, 0.95, 0.95 },
               { 0.0013340000000000001, 0.0026680000000000002, 0.95, 0.95 },
               { 8.000000000004531e-07, 1.6000000000009063e-06, 0.95, 0.95 } },
             1e-9, "one_cycle three-phase, linear, beta1 as momentum, per-group max_lr")
end

do -- ReduceLROnPlateau(sgd1, factor=0.5, patience=2, cooldown=1, min_lr=0.02), 12 metrics
  local opt = sgd1()
  local s = sched.reduce_on_plateau(opt, { factor = 0.5, patience = 2, cooldown = 1, min_lr = 0.02 })
  local metrics = { 1.0, 0.9, 0.95, 0.95, 0.95, 0.95, 0.8, 0.85, 0.85, 0.85, 0.85, 0.85 }
  check.near(run(opt, s, 12, metrics), { { 0.1 }, { 0.1 }, { 0.1 }, { 0.1 }, { 0.1 }, { 0.05 }, { 0.05 }, { 0.05 },
                                         { 0.05 }, { 0.05 }, { 0.025 }, { 0.025 }, { 0.025 } }, tol, "reduce_on_plateau")
  for _ = 1, 10 do s:step(accel.tensor(2.0)) end
  check.near(lrs(opt), { 0.02 }, tol, "reduce_on_plateau stops at min_lr (and takes tensors)")
  check.raises(function() s:step() end, "metric required", "reduce_on_plateau:step", "metric")
end

do -- ReduceLROnPlateau(sgd1, mode='max', threshold=0.1, threshold_mode='abs', patience=1), 6 metrics
  local opt = sgd1()
  local s = sched.reduce_on_plateau(opt, { mode = "max", threshold = 0.1, threshold_mode = "abs", patience = 1 })
  check.near(run(opt, s, 6, { 1.0, 1.05, 1.2, 1.25, 1.28, 1.5 }),
             { { 0.1 }, { 0.1 }, { 0.1 }, { 0.1 }, { 0.1 }, { 0.010000000000000002 }, { 0.010000000000000002 } }, tol,
             "reduce_on_plateau, max mode, absolute threshold")
end

do -- ExponentialLR(gamma=0.9) and StepLR(step_size=2, gamma=0.5) on one SGD(lr=0.1), both stepped, 5 steps
  local opt = optim.SGD({ param() }, { lr = 0.1 })
  local a = sched.exponential(opt, { gamma = 0.9 })
  local b = sched.step(opt, { step_size = 2, gamma = 0.5 })
  local rows = { lrs(opt) }
  for _ = 1, 5 do
    a:step(); b:step(); rows[#rows + 1] = lrs(opt)
  end
  check.near(rows, { { 0.1 }, { 0.09000000000000001 }, { 0.04050000000000001 }, { 0.03645000000000001 },
                     { 0.016402500000000004 }, { 0.014762250000000005 } }, tol, "schedules stack on one optimizer")
end

-- A Lua table that wraps an optimizer (as the Accelerator does) is scheduled
-- through its methods alone.
do
  local inner = sgd2()
  local calls = 0
  local wrapper = {}
  for _, name in ipairs({ "step", "zero_grad", "option", "set_option", "num_param_groups", "state_dict",
                          "load_state_dict" }) do
    wrapper[name] = function(self, ...)
      calls = calls + 1
      return inner[name](inner, ...)
    end
  end
  local s = sched.cosine(wrapper, { total = 6, min_lr = 0.01 })
  for _ = 1, 3 do s:step() end
  check.near(lrs(inner), { 0.055000000000000014, 0.03 }, 1e-10, "a wrapper table is scheduled like the optimizer")
  check.truthy(calls > 0, "the schedule went through the wrapper's methods")
  local plateau = sched.reduce_on_plateau(wrapper, { patience = 0 })
  plateau:step(1.0)
  plateau:step(2.0)
  check.near(lrs(inner), { 0.0055000000000000014, 0.003 }, 1e-10, "reduce_on_plateau through a wrapper")
end

-- state_dict / load_state_dict resume a schedule exactly (with the
-- optimizer's own state, which holds the lr).
do
  local opt = sgd2()
  local s = sched.step(opt, { step_size = 2, gamma = 0.5 })
  for _ = 1, 3 do s:step() end
  local saved_sched, saved_opt = s:state_dict(), opt:state_dict()
  for _ = 1, 3 do s:step() end
  local expected = lrs(opt)

  local opt2 = sgd2()
  local s2 = sched.step(opt2, { step_size = 2, gamma = 0.5 })
  opt2:load_state_dict(saved_opt)
  s2:load_state_dict(saved_sched)
  for _ = 1, 3 do s2:step() end
  check.near(lrs(opt2), expected, tol, "a resumed step schedule continues where it stopped")
  check.equal(s2:state_dict().last_epoch, 6, "last_epoch counts steps")
  check.raises(function() s2:load_state_dict({ last_epoch = 1 }) end, "incomplete state", "missing keys",
               "base_lrs")

  local cycle = sched.one_cycle(sgd1(), { max_lr = 1, total = 10, cycle_momentum = false })
  for _ = 1, 4 do cycle:step() end
  local resumed_opt = sgd1()
  local resumed = sched.one_cycle(resumed_opt, { max_lr = 1, total = 10, cycle_momentum = false })
  resumed:load_state_dict(cycle:state_dict())
  cycle:step()
  resumed:step()
  check.near(resumed:get_last_lr(), cycle:get_last_lr(), tol, "one_cycle without momentum resumes")

  local p = sched.reduce_on_plateau(sgd1())
  check.equal(p:state_dict().best, nil, "no best metric before the first step")
  p:step(0.5)
  local q = sched.reduce_on_plateau(sgd1())
  q:load_state_dict(p:state_dict())
  check.equal(q.best, 0.5, "reduce_on_plateau keeps its best metric")
end

-- bad arguments are named
check.raises(function() sched.step(sgd1(), { step_size = 0 }) end, "step_size", "step_size", "0")
check.raises(function() sched.cosine(sgd1(), { total = 10, warmpu = 2 }) end, "typo", "unknown option 'warmpu'",
             "warmup")
check.raises(function() sched.cosine(sgd1(), { total = 10, warmup = 20 }) end, "warmup > total", "warmup", "20")
check.raises(function() sched.one_cycle(optim.Adagrad({ param() }), { max_lr = 0.1, total = 5 }) end,
             "no momentum", "cycle_momentum")
check.raises(function() sched.one_cycle(sgd2(), { max_lr = { 0.1 }, total = 5, cycle_momentum = false }) end,
             "max_lr per group", "max_lr", "2 numbers")
check.raises(function() sched.lambda(sgd1(), function() return "x" end) end, "lambda result", "returned x")
check.raises(function() sched.exponential({}, { gamma = 0.9 }) end, "not an optimizer", "expected an optimizer")
check.raises(function() sched.reduce_on_plateau(sgd1(), { mode = "maximum" }) end, "mode", "maximum")

check.done("test_lr_scheduler")
