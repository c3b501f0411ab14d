-- A run to steer while it trains (docs/live-runs.md): the learning rate is
-- the global `lr`, read at every step, and a hook `lr` checks a new value
-- before every rank takes it; a spike guard skips a batch whose loss
-- explodes; with CHECKPOINTS, a checkpoint every 1000 steps is written in
-- the background while training goes on.
--   accel-run recipes/steerable.lua --nproc 2 -- [STEPS [CHECKPOINTS]] &
--   accel-run ctl 'lr = 3e-3'        # a chunk, at the next step boundary
--   accel-run ctl 'lr 1e-3'          # the hook
--   accel-run ctl status             # step, loss, lr, memory per rank
--   accel-run ctl pause; accel-run ctl resume
--   accel-run ctl "stop $PWD/steered" # a checkpoint, then the run ends
local nn, optim, data = accel.nn, accel.optim, accel.data

local steps, checkpoints = tonumber(arg[1] or "3000"), arg[2]
acc = accel.Accelerator{}
accel.set_seed(0)

local centers = accel.randn(4, 16) * 3
local labels = accel.randint(1, 5, { 4096 })
local x = centers:index_select(1, labels) + accel.randn(4096, 16)
loader = data.DataLoader(data.TensorDataset(x, labels), { batch_size = 32, shuffle = true })
model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))
opt = optim.AdamW(model:parameters(), { lr = 1e-2 })
model, opt, loader = acc:prepare(model, opt, loader)
lr = 1e-2
acc:spike_guard{ window = 50, factor = 10, action = "skip" }

acc:on_control("lr", function(value)
  assert(type(value) == "number" and value > 0 and value < 1, "lr takes a number between 0 and 1")
  return function() lr = value end
end)

while opt.updates < steps do
  for xb, yb in loader:iter() do
    local loss = nn.functional.cross_entropy(model(xb), yb)
    acc:backward(loss)
    opt:set_option("lr", lr)
    opt:step()
    opt:zero_grad()
    if opt.updates % 500 == 0 then acc:print(string.format("step %d loss %.4f lr %g", opt.updates, loss:item(), lr)) end
    if checkpoints and opt.updates % 1000 == 0 then
      acc:save_state(checkpoints .. "/step_" .. opt.updates, { async = true })
    end
    if opt.updates == steps then break end
  end
end
acc:end_training()  -- waits for the checkpoint in flight
acc:print(string.format("finished at step %d with lr %g", opt.updates, lr))
