-- A batch that explodes the loss (tests/launch/test_spike_guard.sh).
--
--   accel-run spike_recipe.lua -- OUT_DIR MODE [ACTION [SNAPSHOTS [NUM_WORKERS]]]
--
-- MODE "guard": the loader's 30th batch has its targets scaled by 1e3 on the
-- last rank, under acc:spike_guard{action = ACTION, snapshots = SNAPSHOTS};
-- "reference": the 30th batch is left out (no forward, no step). The model
-- has dropout, so a step read again after a rollback draws what it drew the
-- first time only when the generators went back too. The run ends once
-- the loader's 60th batch is done; each step's batch numbers go to
-- OUT_DIR/batches.txt, the weights to OUT_DIR. NUM_WORKERS (default 0) is the
-- loader's: its reader then runs ahead, and a rollback must restart it.
local nn, optim, data = accel.nn, accel.optim, accel.data

local out_dir, mode, action = arg[1], arg[2], arg[3] or "skip"
local snapshots, workers = tonumber(arg[4] or "1"), tonumber(arg[5] or "0")
local acc = accel.Accelerator{}
accel.set_seed(3)
local x = accel.randn(960, 8)
local y = x:sum(2, true) * 0.5 + accel.randn(960, 1) * 0.1
local loader = data.DataLoader(data.TensorDataset(x, y), { batch_size = 8, shuffle = true, num_workers = workers })
local dropout = action == "rollback" and 0.1 or 0
local model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Dropout(dropout), nn.Linear(16, 1))
local opt = optim.SGD(model:parameters(), { lr = 0.05, momentum = 0.9 })
local sched = optim.lr_scheduler.step(opt, { step_size = 10, gamma = 0.9 })
model, opt, loader, sched = acc:prepare(model, opt, loader, sched)
if mode == "guard" then acc:spike_guard{ window = 10, factor = 20, action = action, snapshots = snapshots } end

-- Batch numbers by step: a rollback takes a step again, so the last list
-- is the steps of the run as it ended.
local taken = {}
for xb, yb in loader:iter() do
  local batch = loader:state_dict().batches_done_in_epoch
  if batch == 30 and mode == "guard" and acc.process_index == acc.num_processes - 1 then yb = yb * 1e3 end
  if not (batch == 30 and mode == "reference") then
    local loss = nn.functional.mse_loss(model(xb), yb)
    acc:backward(loss)
    opt:step()
    sched:step()
    opt:zero_grad()
    if not opt.step_was_skipped then taken[opt.updates] = batch end
  end
  if batch == 60 then break end
end
acc:save_model(model, out_dir)
if acc.is_main_process then
  local f = assert(io.open(out_dir .. "/batches.txt", "w"))
  for i = 1, opt.updates do f:write(tostring(taken[i]), "\n") end
  f:close()
end
acc:print(string.format("updates %d", opt.updates))
