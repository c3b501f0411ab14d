-- nproc: 2
-- GradientAccumulationPlugin{sync_each_batch = true} all-reduces gradients on
-- every micro-step yet gives the same weights as accumulating locally;
-- trigger_sync_in_backward makes one non-sync micro-step all-reduce.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local nn, optim, data, F = accel.nn, accel.optim, accel.data, accel.nn.functional
local function all_reduces() return require("accel.core").dist.counts().all_reduce end

local k, B = 3, 4
accel.set_seed(5)
local n = k * B * 2 * 2
local x, y = accel.randn(n, 6), accel.randint(1, 4, { n })

-- Trains one epoch; `each_micro_step(acc, model)` runs before each backward.
-- Returns the weights and the all-reduces of the non-sync micro-steps.
local function train(options, each_micro_step)
  local acc = accel.Accelerator(options)
  accel.set_seed(9)
  local model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
  local opt = optim.SGD(model:parameters(), { lr = 0.1 })
  local loader = data.DataLoader(data.TensorDataset(x, y), { batch_size = B })
  model, opt, loader = acc:prepare(model, opt, loader)
  local off_sync = 0
  for xb, yb in loader:iter() do
    acc:accumulate(model, function()
      if each_micro_step then each_micro_step(acc, model) end
      local before = all_reduces()
      acc:backward(F.cross_entropy(model(xb), yb))
      if not acc.sync_gradients then off_sync = off_sync + all_reduces() - before end
      opt:step()
      opt:zero_grad()
    end)
  end
  return model:parameters(), off_sync
end

local plain, plain_count = train({ gradient_accumulation_steps = k })
check.equal(plain_count, 0, "no all-reduce off sync steps")
local plugin = accel.GradientAccumulationPlugin{ num_steps = k, sync_each_batch = true }
local each, each_count = train({ gradient_accumulation_plugin = plugin })
check.truthy(each_count >= 4, "sync_each_batch all-reduces on the 4 non-sync micro-steps, got " .. each_count)
for i = 1, #plain do check.near(each[i], plain[i], 1e-5, "sync_each_batch weights " .. i) end
local flag, flag_count = train({ gradient_accumulation_steps = k, sync_each_batch = true })
check.equal(flag_count, each_count, "sync_each_batch option")
for i = 1, #plain do check.near(flag[i], plain[i], 1e-5, "sync_each_batch option weights " .. i) end

-- trigger_sync_in_backward: only the first micro-step is forced.
local calls = 0
local triggered, triggered_count = train({ gradient_accumulation_steps = k }, function(acc, model)
  calls = calls + 1
  if calls == 1 then acc:trigger_sync_in_backward(model) end
end)
check.truthy(triggered_count > 0 and triggered_count * 4 == each_count,
             "trigger_sync_in_backward syncs one micro-step: " .. triggered_count .. " vs " .. each_count)
for i = 1, #plain do check.near(triggered[i], plain[i], 1e-5, "triggered weights " .. i) end

-- With backward{num_items}, the per-micro-step syncs keep the final gradient
-- the mean over every item of every micro-step and rank: rank r's micro-step
-- k has r + k items of value r + k, so the mean is (1 + 4 + 4 + 9) / 8.
local function items_gradient(sync_each_batch)
  local acc = accel.Accelerator{ gradient_accumulation_steps = 2, sync_each_batch = sync_each_batch }
  local model = nn.Linear(3, 1)
  model = acc:prepare(model)
  local r, gradient = acc.process_index, nil
  for step = 1, 2 do
    acc:accumulate(model, function()
      local items = r + step
      acc:backward(model(accel.ones(items, 3) * items):sum() / items, { num_items = items })
      if acc.sync_gradients then gradient = model.weight.grad:clone() end
    end)
  end
  return gradient
end
check.near(items_gradient(true), { { 2.25, 2.25, 2.25 } }, 1e-6, "sync_each_batch with num_items: the mean over all items")
check.near(items_gradient(false), { { 2.25, 2.25, 2.25 } }, 1e-6, "and without sync_each_batch")

check.raises(function() accel.GradientAccumulationPlugin{ num_steps = 2, sync_every = true } end,
             "plugin options", "GradientAccumulationPlugin", "sync_every")
check.raises(function() accel.Accelerator{ gradient_accumulation_steps = 2, gradient_accumulation_plugin = plugin } end,
             "both", "not both")
local acc = accel.Accelerator{ gradient_accumulation_plugin = plugin }
check.equal(acc.gradient_accumulation_steps, k, "num_steps")
check.done("test_sync_each_batch")
