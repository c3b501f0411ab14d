-- What logging costs a training step: digits-mlp (bench/workloads/
-- digits_mlp.lua's model, data and optimizer) with and without acc:log of
-- 12 scalars every step to both trackers (log_with = "all"), in alternating
-- rounds so that drift of the machine falls on both alike; and the cost of
-- acc:log alone, timed over many calls, against the step's time.
--   build/accel-run bench/tracking_cost.lua [-- STEPS ROUNDS]
-- The contract: logging every step costs at most 1% of the step.
local nn, optim, data = accel.nn, accel.optim, accel.data
local F = nn.functional

local steps, rounds = tonumber(arg[1] or "300"), tonumber(arg[2] or "3")
local project = os.tmpname()
os.remove(project)
local acc = accel.Accelerator{ log_with = "all", project_dir = project }
assert(acc.num_processes == 1, "run on one process: the figures are one rank's")
accel.set_seed(0)

local rows = data.read_csv(os.getenv("ACCEL_BENCH_DIGITS")
                           or "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz")
local x = rows:narrow(2, 1, 64) / 16
local y = rows:select(2, 65):long() + 1
local loader = data.DataLoader(data.TensorDataset(x, y), { batch_size = 64, shuffle = true })
local model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
local opt = optim.AdamW(model:parameters(), { lr = 1e-3 })
model, opt, loader = acc:prepare(model, opt, loader)
acc:init_trackers("cost", { lr = 1e-3, batch_size = 64 })

local names = {}
for i = 1, 12 do names[i] = "metric_" .. i end
local values = {}
local step_number = 0

-- Seconds per step over `n` steps, logging each step or not.
local function run(n, log)
  local done, start = 0, accel.time()
  while done < n do
    for xb, yb in loader:iter() do
      local loss = F.cross_entropy(model(xb), yb)
      acc:backward(loss)
      opt:step()
      opt:zero_grad()
      local l = loss:item()  -- both ways: a recipe reads its loss anyway
      if log then
        for i = 1, 12 do values[names[i]] = l * i end
        step_number = step_number + 1
        acc:log(values, step_number)
      end
      done = done + 1
      if done == n then break end
    end
  end
  return (accel.time() - start) / n
end

run(50, false)  -- warm-up
local plain, logged = 0, 0
for _ = 1, rounds do
  plain = plain + run(steps, false) / rounds
  logged = logged + run(steps, true) / rounds
end

local calls = 20000
local start = accel.time()
for i = 1, calls do
  for k = 1, 12 do values[names[k]] = i * k end
  acc:log(values, step_number + i)
end
local per_log = (accel.time() - start) / calls
acc:end_training()
os.execute("rm -rf '" .. project .. "'")

print(string.format("digits-mlp step: %.1f us without logging, %.1f us logging 12 scalars (ratio %.4f)",
                    plain * 1e6, logged * 1e6, logged / plain))
print(string.format("acc:log of 12 scalars alone: %.2f us = %.2f%% of a step (contract: at most 1%%)",
                    per_log * 1e6, 100 * per_log / plain))
