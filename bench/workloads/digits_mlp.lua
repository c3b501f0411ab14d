-- W1 digits-mlp: MLP 64-256-256-10 on the digits set, batch 64 per rank,
-- AdamW lr 1e-3, seed 0. Twin of bench/cpp/digits_mlp.cpp and
-- bench/python/digits_mlp.py. The data is Debian's scikit-learn's, or the
-- file ACCEL_BENCH_DIGITS names (where scikit-learn came from pip).
--   accel-run bench/workloads/digits_mlp.lua --nproc 2 --threads 1 [-- warmup window windows]
local bench = dofile(arg[0]:match("^(.*/)") .. "bench.lua")
local nn, optim, data = accel.nn, accel.optim, accel.data
local F = nn.functional

local acc = accel.Accelerator{}
accel.set_seed(0)

local rows = data.read_csv(os.getenv("ACCEL_BENCH_DIGITS")
                           or "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz")
local x = rows:narrow(2, 1, 64) / 16                  -- 1797 x 64, pixels 0..16
local y = rows:select(2, 65):long() + 1               -- classes 1..10 for digits 0..9
local loader = data.DataLoader(data.TensorDataset(x, y), { batch_size = 64, shuffle = true })

local model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
local opt = optim.AdamW(model:parameters(), { lr = 1e-3 })
model, opt, loader = acc:prepare(model, opt, loader)

bench.train(acc, loader, function(xb, yb)
  local loss = F.cross_entropy(model(xb), yb)
  acc:backward(loss)
  opt:step()
  opt:zero_grad()
  return loss:item()
end)
