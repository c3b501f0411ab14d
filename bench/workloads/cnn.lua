-- W2 cnn: conv 1->16 k3, ReLU, maxpool 2, conv 16->32 k3, ReLU, maxpool 2,
-- linear to 10, on 2048 synthetic 1x28x28 images (randn and randint after
-- seeding 0), batch 32 per rank, AdamW lr 1e-3. Twin of bench/cpp/cnn.cpp
-- and bench/python/cnn.py.
--   accel-run bench/workloads/cnn.lua --nproc 2 --threads 1 [-- warmup window windows]
local bench = dofile(arg[0]:match("^(.*/)") .. "bench.lua")
local nn, optim, data = accel.nn, accel.optim, accel.data
local F = nn.functional

local acc = accel.Accelerator{}
accel.set_seed(0)

local x = accel.randn(2048, 1, 28, 28)
local y = accel.randint(1, 11, { 2048 })              -- classes 1..10
local loader = data.DataLoader(data.TensorDataset(x, y), { batch_size = 32, shuffle = true })

local model = nn.Sequential(
  nn.Conv2d(1, 16, 3), nn.ReLU(), nn.MaxPool2d(2),
  nn.Conv2d(16, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
  nn.Flatten(), nn.Linear(32 * 5 * 5, 10))
local opt = optim.AdamW(model:parameters(), { lr = 1e-3 })
model, opt, loader = acc:prepare(model, opt, loader)

bench.train(acc, loader, function(xb, yb)
  local loss = F.cross_entropy(model(xb), yb)
  acc:backward(loss)
  opt:step()
  opt:zero_grad()
  return loss:item()
end)
