-- Handwritten digits (8x8 images, 1797 samples) with a small CNN.
--   accel-run recipes/cnn.lua --nproc 2 [-- path/to/digits.csv.gz]
-- The data set ships with Debian's python3-sklearn package.
local nn, optim, data = accel.nn, accel.optim, accel.data

local path = arg[1] or "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"
local epochs = 20

local acc = accel.Accelerator{}
accel.set_seed(0)

local rows = data.read_csv(path)                      -- 1797 x 65: pixels 0..16, then the digit
local x = (rows:narrow(2, 1, 64) / 16):view(-1, 1, 8, 8)  -- one channel of 8x8
local y = rows:select(2, 65):long() + 1               -- classes 1..10 for digits 0..9
local order = accel.randperm(x:size(1))               -- the same split on every rank
local n_train = 1437
local train_idx, test_idx = order:narrow(1, 1, n_train), order:narrow(1, n_train + 1, x:size(1) - n_train)

local train = data.DataLoader(data.TensorDataset(x:index_select(1, train_idx), y:index_select(1, train_idx)),
                              { batch_size = 32, shuffle = true })
local test = data.DataLoader(data.TensorDataset(x:index_select(1, test_idx), y:index_select(1, test_idx)),
                             { batch_size = 128 })

train, test = acc:prepare(train, test)                 -- sharded: num_batches() is per rank now

local model = nn.Sequential(
  nn.Conv2d(1, 16, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2),    -- 16 x 4 x 4
  nn.Conv2d(16, 32, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2),   -- 32 x 2 x 2
  nn.Flatten(), nn.Dropout(0.2), nn.Linear(128, 10))
local opt = optim.AdamW(model:parameters(), { lr = 3e-3, weight_decay = 0.01 })
local sched = optim.lr_scheduler.cosine(opt, { total = epochs * train:num_batches() })
model, opt, sched = acc:prepare(model, opt, sched)

local bar = accel.progress(epochs, { desc = "epochs" })
for epoch in bar do
  model:train()
  local total = 0
  for xb, yb in train:iter() do
    local loss = nn.functional.cross_entropy(model(xb), yb)
    acc:backward(loss)
    opt:step()
    sched:step()
    opt:zero_grad()
    total = total + loss:item()
  end
  bar:set_postfix{ loss = total / train:num_batches(), lr = sched:get_last_lr()[1] }
end

model:eval()
local correct, seen = 0, 0
accel.no_grad(function()
  for xb, yb in test:iter() do
    local hits = acc:gather(model(xb):argmax(-1):eq(yb))
    correct, seen = correct + hits:sum():item(), seen + hits:numel()
  end
end)
acc:print(string.format("test accuracy %.4f", correct / seen))
