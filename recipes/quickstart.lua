-- Quickstart: an MLP learns a synthetic 4-class problem made right here.
--   accel-run recipes/quickstart.lua --nproc 2
local nn, optim, data = accel.nn, accel.optim, accel.data

local acc = accel.Accelerator{}
accel.set_seed(0)

-- Four Gaussian blobs in 16 dimensions; the same on every rank (same seed).
local function blobs(n)
  local centers = accel.randn(4, 16) * 3
  local labels = accel.randint(1, 5, { n })
  local x = centers:index_select(1, labels) + accel.randn(n, 16)
  return x, labels
end
local centers_x, centers_y = blobs(4096)
local train = data.DataLoader(data.TensorDataset(centers_x:narrow(1, 1, 3072), centers_y:narrow(1, 1, 3072)),
                              { batch_size = 32, shuffle = true })
local test = data.DataLoader(data.TensorDataset(centers_x:narrow(1, 3073, 1024), centers_y:narrow(1, 3073, 1024)),
                             { batch_size = 256 })

local model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))
local opt = optim.AdamW(model:parameters(), { lr = 1e-2 })
model, opt, train, test = acc:prepare(model, opt, train, test)

for epoch = 1, 3 do
  local bar = accel.progress(train, { desc = "epoch " .. epoch })
  for x, y in bar do
    local loss = nn.functional.cross_entropy(model(x), y)
    acc:backward(loss)
    opt:step()
    opt:zero_grad()
    bar:set_postfix{ loss = loss }
  end
end

local correct, total = 0, 0
accel.no_grad(function()
  for x, y in test:iter() do
    local hits = acc:gather(model(x):argmax(-1):eq(y))
    correct, total = correct + hits:sum():item(), total + hits:numel()
  end
end)
acc:print(string.format("accuracy %.4f", correct / total))
