-- Step time of data-parallel training with gradient buckets all-reduced
-- during backward (overlapped, what the Accelerator does) against the same
-- buckets all-reduced after backward. Same model, data and ranks.
--   build/accel-run bench/gradient_overlap.lua --nproc 2 [-- steps]
local core = require("accel.core")
local nn, F = accel.nn, accel.nn.functional

local steps = tonumber(arg[1]) or 40
local warmup = 5
local acc = accel.Accelerator{}
assert(acc.num_processes > 1, "run with --nproc 2 or more")

-- Median step time in milliseconds, and the number of buckets.
local function time_steps(overlap)
  accel.set_seed(0)
  local layers = {}
  for _ = 1, 8 do
    layers[#layers + 1] = nn.Linear(512, 512)
    layers[#layers + 1] = nn.ReLU()
  end
  local model = nn.Sequential(unpack(layers))
  local reducer = core.dist.GradientReducer(model:parameters(), 1024 * 1024, overlap)
  local opt = accel.optim.SGD(model:parameters(), { lr = 1e-3 })
  local x, y = accel.randn(64, 512), accel.randn(64, 512)
  local times = {}
  for step = 1, steps + warmup do
    acc:wait_for_everyone()
    local start = accel.time()
    F.mse_loss(model(x), y):backward()
    reducer:finalize(acc.num_processes)
    opt:step()
    opt:zero_grad()
    if step > warmup then times[#times + 1] = (accel.time() - start) * 1000 end
  end
  table.sort(times)
  return times[math.ceil(#times / 2)], reducer:num_buckets()
end

local overlapped, buckets = time_steps(true)
local after = time_steps(false)
acc:print(string.format("| ranks | model | buckets | overlapped ms/step | after backward ms/step | ratio |"))
acc:print("|---|---|---|---|---|---|")
acc:print(string.format("| %d | 8 x Linear(512, 512), batch 64 | %d | %.2f | %.2f | %.2f |",
                        acc.num_processes, buckets, overlapped, after, overlapped / after))
