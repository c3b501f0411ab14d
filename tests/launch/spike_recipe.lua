-- A batch that explodes the loss (tests/launch/test_spike_guard.sh).
--
--   accel-run spike_recipe.lua -- OUT_DIR MODE [ACTION]
--
-- MODE "guard": the 30th batch's targets are scaled by 1e3 on the last rank, under
-- acc:spike_guard{action = ACTION}; "reference": the 30th batch is left
-- out (no forward, no step). 60 batches; the weights go to OUT_DIR.
local nn, optim, data = accel.nn, accel.optim, accel.data

local out_dir, mode, action = arg[1], arg[2], arg[3] or "skip"
local acc = accel.Accelerator{}
accel.set_seed(3)
local x = accel.randn(960, 8)
local y = x:sum(2, true) * 0.5 + accel.randn(960, 1) * 0.1
local loader = data.DataLoader(data.TensorDataset(x, y), { batch_size = 8, shuffle = true })
local model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
local opt = optim.SGD(model:parameters(), { lr = 0.05, momentum = 0.9 })
model, opt, loader = acc:prepare(model, opt, loader)
if mode == "guard" then acc:spike_guard{ window = 10, factor = 20, action = action } end

local batch = 0
for xb, yb in loader:iter() do
  batch = batch + 1
  if batch == 30 and mode == "guard" and acc.process_index == acc.num_processes - 1 then yb = yb * 1e3 end
  if not (batch == 30 and mode == "reference") then
    local loss = nn.functional.mse_loss(model(xb), yb)
    acc:backward(loss)
    opt:step()
    opt:zero_grad()
  end
  if batch == 60 then break end
end
acc:save_model(model, out_dir)
acc:print(string.format("updates %d", opt.updates))
