-- nproc: 2 3
-- Port of Accelerate's test_utils/scripts/external_deps/test_metrics.py:
-- gather_for_metrics returns every sample exactly once, with split_batches
-- and dispatch_batches, from iterable data sets and with drop_last; and a
-- metric computed distributed equals the single-process one. The original's
-- MRPC/BERT check becomes a small classifier on synthetic data (no model or
-- data set downloads here).
local dir = arg[0]:match("(.*/)")
local check = dofile(dir .. "helpers/check.lua")
local nn, data = accel.nn, accel.data
local training = dofile(dir .. "helpers/accelerate_training.lua")
local sections = dofile(dir .. "helpers/accelerate_sections.lua")(check, "test_accelerate_metrics")
local W = accel.Accelerator{}.num_processes

local function total_rows(acc, loader, forward)
  local rows = 0
  for batch in loader:iter() do
    local out = accel.no_grad(function() return forward(batch) end)
    local gathered = acc:gather_for_metrics({ out, batch.y })
    rows = rows + gathered[1]:size(1)
  end
  return rows
end

local function torch_metrics(split_batches, dispatch_batches, num_samples)
  local acc = accel.Accelerator{ split_batches = split_batches, dispatch_batches = dispatch_batches or nil }  -- false is the default
  accel.set_seed(42)
  local batch_size = split_batches and training.divisible_batch_size(16, W) or 16
  local model, loader = acc:prepare(training.RegressionModel(),
    data.DataLoader(training.RegressionDataset{ length = num_samples }, { batch_size = batch_size }))
  check.equal(total_rows(acc, loader, function(batch) return model(batch.x) end), num_samples, "samples gathered")
end

for _, split_batches in ipairs({ true, false }) do
  for _, dispatch_batches in ipairs({ true, false }) do
    sections.run(string.format("torch_metrics:split_batches=%s:dispatch_batches=%s:length=99",
                               tostring(split_batches), tostring(dispatch_batches)),
                 function() torch_metrics(split_batches, dispatch_batches, 99) end)
  end
end
sections.run("last_batch_not_dropped_when_divisible", function() torch_metrics(false, false, 512) end)

-- Accuracy and F1 of a fixed classifier: one process over the whole
-- loader, then distributed with gather_for_metrics.
local function classification_metrics(predictions, references)
  local tp, fp, fn, correct = 0, 0, 0, 0
  for i, p in ipairs(predictions) do
    local r = references[i]
    if p == r then correct = correct + 1 end
    if p == 2 and r == 2 then tp = tp + 1 end
    if p == 2 and r ~= 2 then fp = fp + 1 end
    if p ~= 2 and r == 2 then fn = fn + 1 end
  end
  return correct / #predictions, 2 * tp / (2 * tp + fp + fn)
end
local function mrpc_like(split_batches, dispatch_batches)
  accel.manual_seed(7)
  local n = 408
  local x = accel.randn(n, 8)
  local labels = (x:select(2, 1) + accel.randn(n) * 0.5):gt(0):long() + 1
  local function make_model() accel.manual_seed(3) return nn.Linear(8, 2) end
  local baseline_model = make_model()
  local function collect(model, loader, gather)
    local preds, refs = {}, {}
    for xb, yb in loader:iter() do
      local p = accel.no_grad(function() return model(xb):argmax(-1) end)
      if gather then
        local g = gather({ p, yb })
        p, yb = g[1], g[2]
      end
      for _, v in ipairs(p:totable()) do preds[#preds + 1] = v end
      for _, v in ipairs(yb:totable()) do refs[#refs + 1] = v end
    end
    return preds, refs
  end
  local batch_size = split_batches and training.divisible_batch_size(16, W) or 16
  local base_acc, base_f1 = classification_metrics(collect(baseline_model,
    data.DataLoader(data.TensorDataset(x, labels), { batch_size = batch_size })))
  local acc = accel.Accelerator{ split_batches = split_batches, dispatch_batches = dispatch_batches or nil }  -- false is the default
  local model, loader = acc:prepare(make_model(),
    data.DataLoader(data.TensorDataset(x, labels), { batch_size = batch_size }))
  local preds, refs = collect(model, loader, function(v) return acc:gather_for_metrics(v) end)
  check.equal(#preds, n, "every sample once")
  local dist_acc, dist_f1 = classification_metrics(preds, refs)
  check.near(dist_acc, base_acc, 1e-12, "accuracy")
  check.near(dist_f1, base_f1, 1e-12, "f1")
end
for _, split_batches in ipairs({ true, false }) do
  for _, dispatch_batches in ipairs({ true, false }) do
    sections.run(string.format("mrpc_like:split_batches=%s:dispatch_batches=%s", tostring(split_batches),
                               tostring(dispatch_batches)),
                 function() mrpc_like(split_batches, dispatch_batches) end)
  end
end

-- A data set read through iter() with a length, as the original's
-- IterableDataset: tensors, then plain Lua numbers.
local Iterable = {}
Iterable.__index = Iterable
Iterable.__len = function(self) return #self.values end
function Iterable:iter()
  local i = 0
  return function()
    i = i + 1
    return self.values[i]
  end
end
local function iterable_gather(as_tensors)
  local values = {}
  for i = 0, 29 do values[#values + 1] = as_tensors and accel.tensor(i, { dtype = accel.int64 }) or i end
  local acc = accel.Accelerator{}
  local loader = acc:prepare(data.DataLoader(setmetatable({ values = values }, Iterable), { batch_size = 4 }))
  local parts = {}
  for batch in loader:iter() do parts[#parts + 1] = acc:gather_for_metrics(batch) end
  check.equal(accel.cat(parts, 1):size(1), 30, "samples gathered")
end
sections.run("gather_for_metrics_with_iterable_dataset", function() iterable_gather(true) end)
sections.run("gather_for_metrics_with_non_tensor_objects_iterable_dataset", function() iterable_gather(false) end)

sections.run("gather_for_metrics_drop_last", function()
  local acc = accel.Accelerator{}
  local per_device_batch_size = 5
  local num_items = 10 * W + 1
  local loader = acc:prepare(data.DataLoader(data.TensorDataset(accel.arange(num_items)),
                                             { batch_size = per_device_batch_size, drop_last = true }))
  local iterator = loader:iter()
  iterator()
  local gathered = acc:gather_for_metrics(iterator())
  check.equal(gathered:size(1), per_device_batch_size * W, "a full batch from every rank")
end)

sections.finish()
