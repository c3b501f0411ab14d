-- nproc: 2 3
-- Gradient accumulation: k micro-steps of batch B on R ranks give the same
-- weights as one step of batch k*B*R on one process, with no all-reduce on
-- the micro-steps that do not synchronise; the end of a loader forces a
-- sync; backward{num_items} weights micro-batches of different sizes
-- exactly. Run at 2 and 3 ranks (tests/CMakeLists.txt).
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local nn, optim, data, F = accel.nn, accel.optim, accel.data, accel.nn.functional
local function counts() return require("accel.core").dist.counts().all_reduce end

local k, B = 3, 4
local acc = accel.Accelerator{ gradient_accumulation_steps = k }
local R = acc.num_processes

accel.set_seed(5)
local n = k * B * R * 2  -- two optimizer updates
local x, y = accel.randn(n, 6), accel.randint(1, 4, { n })

local function make_model()
  accel.set_seed(9)
  return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
end

-- One process, batch k*B*R.
local baseline = make_model()
local base_opt = optim.AdamW(baseline:parameters(), { lr = 1e-2 })
for xb, yb in data.DataLoader(data.TensorDataset(x, y), { batch_size = k * B * R }):iter() do
  F.cross_entropy(baseline(xb), yb):backward()
  base_opt:step()
  base_opt:zero_grad()
end

local model = make_model()
local opt = optim.AdamW(model:parameters(), { lr = 1e-2 })
local loader = data.DataLoader(data.TensorDataset(x, y), { batch_size = B })
model, opt, loader = acc:prepare(model, opt, loader)
local syncs, micro = 0, 0
for xb, yb in loader:iter() do
  acc:accumulate(model, function()
    local before = counts()
    acc:backward(F.cross_entropy(model(xb), yb))
    micro = micro + 1
    if acc.sync_gradients then
      syncs = syncs + 1
      check.equal(counts() - before, 1, "one bucket all-reduced on a sync step")
    else
      check.equal(counts() - before, 0, "no all-reduce on micro-step " .. micro)
    end
    opt:step()
    opt:zero_grad()
  end)
end
check.equal(micro, 2 * k, "micro-steps")
check.equal(syncs, 2, "a sync every k micro-steps")
check.equal(opt.updates, 2, "optimizer updates")
local expected = baseline:state_dict()
for name, p in model:named_parameters() do
  check.near(p, expected[name], 1e-5, "accumulated = large batch: " .. name)
end

-- num_items: micro-batches of 1, 3 and 5 rows per rank weigh by their rows,
-- so the result equals one mean over all 18 rows of both ranks.
local acc2 = accel.Accelerator{ gradient_accumulation_steps = 3 }
local probe = make_model()
local big = make_model()
acc2:prepare(probe)
local sizes, offset = { 1, 3, 5 }, 0
local rows_of = {}
for i, size in ipairs(sizes) do
  local rows = x:narrow(1, offset + acc2.process_index * size + 1, size)
  local labels = y:narrow(1, offset + acc2.process_index * size + 1, size)
  rows_of[i] = { rows, labels }
  offset = offset + size * R
  acc2:accumulate(probe, function()
    acc2:backward(F.cross_entropy(probe(rows), labels), { num_items = size })
  end)
end
F.cross_entropy(big(x:narrow(1, 1, offset)), y:narrow(1, 1, offset)):backward()
for name, p in probe:named_parameters() do
  local want = nil
  for other, q in big:named_parameters() do
    if other == name then want = q.grad end
  end
  check.near(p.grad, want, 1e-5, "num_items weighting: " .. name)
end

-- The last batch of a loader syncs even mid-group: 5 batches, k = 3.
local acc3 = accel.Accelerator{ gradient_accumulation_steps = 3 }
local tail_model = make_model()
local tail_opt = optim.SGD(tail_model:parameters(), { lr = 0.1 })
local tail_loader = data.DataLoader(data.TensorDataset(x:narrow(1, 1, 5 * R), y:narrow(1, 1, 5 * R)),
                                    { batch_size = 1 })
tail_model, tail_opt, tail_loader = acc3:prepare(tail_model, tail_opt, tail_loader)
local synced_at = {}
local i = 0
for xb, yb in tail_loader:iter() do
  i = i + 1
  acc3:accumulate(tail_model, function()
    acc3:backward(F.cross_entropy(tail_model(xb), yb))
    if acc3.sync_gradients then synced_at[#synced_at + 1] = i end
    tail_opt:step()
    tail_opt:zero_grad()
  end)
end
check.equal(table.concat(synced_at, ","), "3,5", "sync every 3 micro-steps and at the loader's end")
check.equal(tail_opt.updates, 2, "two updates from five micro-steps")

-- clip_grad_norm acts on sync steps and returns the norm
local function grad_norm()
  local total = 0
  for _, p in ipairs(probe:parameters()) do total = total + (p.grad * p.grad):sum():item() end
  return math.sqrt(total)
end
local before_clip = grad_norm()
local norm = acc2:clip_grad_norm(probe:parameters(), 0.01)
check.near(norm:item(), before_clip, 1e-5, "clip_grad_norm returns the norm before clipping")
check.truthy(before_clip > 0.01, "the gradients needed clipping")
check.near(grad_norm() / 0.01, 1, 1e-4, "gradients clipped to max_norm")
check.done(check.run_name("test_accumulation"))
