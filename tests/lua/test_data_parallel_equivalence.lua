-- nproc: 2
-- Two ranks with batch B per rank end with the same weights (1e-5) as one
-- process with batch 2B on the same data, after 5 AdamW steps with
-- shuffling. The single-process baseline runs in each rank, unprepared.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local nn, optim, data, F = accel.nn, accel.optim, accel.data, accel.nn.functional

local acc = accel.Accelerator{}
check.equal(acc.num_processes, 2, "two ranks")

accel.set_seed(7)
local x, y = accel.randn(80, 10), accel.randint(1, 4, { 80 })
local B, steps = 8, 5

local function make_model()
  accel.set_seed(11)  -- the same initial weights for both runs
  return nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3))
end

local function train(model, opt, loader, backward)
  local n = 0
  for xb, yb in loader:iter() do
    backward(F.cross_entropy(model(xb), yb))
    opt:step()
    opt:zero_grad()
    n = n + 1
    if n == steps then break end
  end
end

local baseline = make_model()
train(baseline, optim.AdamW(baseline:parameters(), { lr = 1e-2 }),
      data.DataLoader(data.TensorDataset(x, y), { batch_size = 2 * B, shuffle = true, seed = 5 }),
      function(loss) loss:backward() end)

local model = make_model()
local opt = optim.AdamW(model:parameters(), { lr = 1e-2 })
local loader = data.DataLoader(data.TensorDataset(x, y), { batch_size = B, shuffle = true, seed = 5 })
model, opt, loader = acc:prepare(model, opt, loader)
local before = require("accel.core").dist.counts().all_reduce
train(model, opt, loader, function(loss) acc:backward(loss) end)
check.equal(require("accel.core").dist.counts().all_reduce - before, steps, "one bucketed all-reduce per step")

local expected = baseline:state_dict()
for name, p in model:named_parameters() do
  check.near(p, expected[name], 1e-5, "rank " .. acc.process_index .. " " .. name)
  -- and every rank holds the same weights
  local both = acc:gather(p:unsqueeze(1))
  check.near(both[1], both[2], 0, name .. " equal on both ranks")
end

check.done("test_data_parallel_equivalence")
