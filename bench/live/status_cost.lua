-- The run bench/live/status_cost.py steers: an MLP (3 x Linear(512, 512),
-- batch 128, AdamW) trained until the file STOP appears, the run's control
-- channel open as every cold run's is. READY is made after the warm-up;
-- each step's end goes to OUT, one a line: the wall clock (accel.time,
-- CLOCK_MONOTONIC) and the process's CPU time (os.clock: every thread's).
--   accel-run bench/live/status_cost.lua --threads 1 -- OUT READY STOP
local nn, optim = accel.nn, accel.optim

local out, ready, stop = arg[1], arg[2], arg[3]
local acc = accel.Accelerator{}
assert(acc.num_processes == 1, "run on one process (the stop file is seen by each rank at its own step)")
accel.set_seed(0)
local model = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512))
local opt = optim.AdamW(model:parameters(), { lr = 1e-4 })
model, opt = acc:prepare(model, opt)
local x, y = accel.randn(128, 512), accel.randn(128, 512)

local ends = {}
local function exists(path)
  local f = io.open(path)
  if f then f:close() end
  return f ~= nil
end
while true do
  acc:backward(nn.functional.mse_loss(model(x), y))
  opt:step()
  opt:zero_grad()
  ends[#ends + 1] = { accel.time(), os.clock() }
  if #ends == 20 and acc.is_main_process then io.open(ready, "w"):close() end
  if #ends % 10 == 0 and exists(stop) then break end
end
if acc.is_main_process then
  local f = assert(io.open(out, "w"))
  for _, t in ipairs(ends) do f:write(string.format("%.6f %.6f\n", t[1], t[2])) end
  f:close()
end
