-- Handwritten digits (8x8 images, 1797 samples) with an MLP.
--   accel-run recipes/digits.lua --nproc 2 [-- path/to/digits.csv.gz [PROJECT_DIR]]
-- The data set ships with Debian's python3-sklearn package. The loss and
-- accuracy go to PROJECT_DIR/digits/ (default runs/digits/): metrics.jsonl
-- and TensorBoard's files; `accel-run plot runs/digits` draws them.
local nn, optim, data = accel.nn, accel.optim, accel.data

local path = arg[1] or "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"

local acc = accel.Accelerator{ log_with = "all", project_dir = arg[2] or "runs" }
accel.set_seed(0)
local config = { lr = 3e-3, weight_decay = 0.01, batch_size = 32, epochs = 20 }
acc:init_trackers("digits", config)

local rows = data.read_csv(path)                      -- 1797 x 65: pixels 0..16, then the digit
local x = rows:narrow(2, 1, 64) / 16
local y = rows:select(2, 65):long() + 1               -- classes 1..10 for digits 0..9
local order = accel.randperm(x:size(1))               -- the same split on every rank
local n_train = 1437
local train_idx, test_idx = order:narrow(1, 1, n_train), order:narrow(1, n_train + 1, x:size(1) - n_train)

local train = data.DataLoader(data.TensorDataset(x:index_select(1, train_idx), y:index_select(1, train_idx)),
                              { batch_size = 32, shuffle = true })
local test = data.DataLoader(data.TensorDataset(x:index_select(1, test_idx), y:index_select(1, test_idx)),
                             { batch_size = 128 })

local model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
local opt = optim.AdamW(model:parameters(), { lr = config.lr, weight_decay = config.weight_decay })
model, opt, train, test = acc:prepare(model, opt, train, test)

local step = 0
local epochs = accel.progress(config.epochs, { desc = "epochs" })
for epoch in epochs do
  local total = 0
  for xb, yb in train:iter() do
    local loss = nn.functional.cross_entropy(model(xb), yb)
    acc:backward(loss)
    opt:step()
    opt:zero_grad()
    step = step + 1
    acc:log({ loss = loss }, step)
    total = total + loss:item()
  end
  epochs:set_postfix{ loss = total / train:num_batches() }
end

local correct, seen = 0, 0
accel.no_grad(function()
  for xb, yb in test:iter() do
    local hits = acc:gather(model(xb):argmax(-1):eq(yb))
    correct, seen = correct + hits:sum():item(), seen + hits:numel()
  end
end)
acc:log({ test_accuracy = correct / seen }, step)
acc:print(string.format("test accuracy %.4f", correct / seen))
acc:end_training()
