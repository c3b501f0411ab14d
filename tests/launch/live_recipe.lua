-- A run to steer (tests/launch/test_live_control.sh): SGD with momentum on
-- shuffled batches, the learning rate read from the global `lr` at every
-- step, so that `accel-run ctl 'lr = 0.05'` changes it.
--
--   accel-run live_recipe.lua -- OUT_DIR STEPS [key=value ...]
--
-- keys: sleep=S (seconds per step, to leave time to steer), ready=FILE
-- (made after step 3), changes=STEP:LR,... (the reference: lr changes after
-- those steps, as a chunk applied there changes it), resume=DIR
-- (acc:load_state first). The final weights go to OUT_DIR (acc:save_model).
local nn, optim, data = accel.nn, accel.optim, accel.data
local core = require("accel.core")

local out_dir, total = arg[1], tonumber(arg[2])
local opts = {}
for i = 3, #arg do
  local key, value = arg[i]:match("^([%w_]+)=(.*)$")
  opts[key] = value
end
local changes = {}
for step, value in (opts.changes or ""):gmatch("(%d+):([%d.e-]+)") do changes[tonumber(step)] = tonumber(value) end

acc = accel.Accelerator{}
accel.set_seed(5)
local x = accel.randn(96, 8)
local y = x:sum(2, true) * 0.3 + accel.randn(96, 1) * 0.1
loader = data.DataLoader(data.TensorDataset(x, y), { batch_size = 8, shuffle = true })
model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
opt = optim.SGD(model:parameters(), { lr = 0.1, momentum = 0.9 })
model, opt, loader = acc:prepare(model, opt, loader)
lr = 0.1

if opts.resume then acc:load_state(opts.resume) end

while opt.updates < total do
  for xb, yb in loader:iter() do
    local loss = nn.functional.mse_loss(model(xb), yb)
    acc:backward(loss)
    opt:set_option("lr", lr)
    opt:step()
    opt:zero_grad()
    local step = opt.updates
    if changes[step] then lr = changes[step] end
    if opts.ready and step == 3 and acc.is_main_process then io.open(opts.ready, "w"):close() end
    if opts.sleep then core.live.sleep(tonumber(opts.sleep)) end
    if step == total then break end
  end
end
acc:save_model(model, out_dir)
acc:print(string.format("finished at step %d with lr %g", opt.updates, lr))
