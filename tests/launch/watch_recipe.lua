-- Trains a small model on 2 ranks and saves its weights to arg[1], for
-- test_watch.sh to compare a warm rerun under --watch with a cold run. It
-- draws from every generator a run must find fresh: Lua's math.random
-- before any seed, and LibTorch's after the recipe's own (initial weights,
-- the loader's shuffle, dropout). LR is replaced by the test; helpers.lua,
-- beside it, is required from the recipe's folder.
local nn, optim, data = accel.nn, accel.optim, accel.data
local helpers = require("helpers")
local acc = accel.Accelerator{}
local jitter = math.random()
accel.set_seed(11)
local model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 3))
local x = accel.randn(64, 8) * (1 + 0.1 * jitter)
local y = accel.randint(1, 4, { 64 })
local loader = data.DataLoader(data.TensorDataset(x, y), { batch_size = 8, shuffle = true })
local opt = optim.AdamW(model:parameters(), { lr = LR })
model, opt, loader = acc:prepare(model, opt, loader)
for _ = 1, helpers.epochs do
  for xb, yb in loader:iter() do
    acc:backward(nn.functional.cross_entropy(model(xb), yb))
    opt:step()
    opt:zero_grad()
  end
end
acc:save_model(model, arg[1])
-- Each rank's pid, to tell warm workers from new ones, and the restart
-- count it was started with.
local stat = io.open("/proc/self/stat")
local pid = stat:read("*n")
stat:close()
local out = io.open(arg[1] .. "/pid." .. acc.process_index, "w")
out:write(pid)
out:close()
out = io.open(arg[1] .. "/restart_count." .. acc.process_index, "w")
out:write(os.getenv("ACCEL_RESTART_COUNT"))
out:close()
