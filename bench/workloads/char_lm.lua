-- W3 char-lm: embedding 96 -> 128, two causal Transformer encoder layers
-- (4 heads, feed-forward 512, PyTorch's defaults otherwise), a linear head
-- to 96; windows of 64 characters of GPL-3 (byte b -> b - 32 for printable
-- ASCII, 95 otherwise), batch 16 per rank, AdamW lr 1e-3. Twin of
-- bench/cpp/char_lm.cpp and bench/python/char_lm.py.
-- ACCEL_BENCH_CHARLM=large selects char-lm-large for the GPU table: width
-- 1024, 8 layers of 16 heads, feed-forward 4096, windows of 256, batch 64.
-- ACCEL_BENCH_PRECISION (no, bf16, fp8) and ACCEL_BENCH_CUDA_GRAPHS=1 give
-- the Accelerator mixed_precision and cuda_graphs (bench/gpu/harness.py's
-- extra rows).
--   accel-run bench/workloads/char_lm.lua --nproc 2 --threads 1 [-- warmup window windows]
local bench = dofile(arg[0]:match("^(.*/)") .. "bench.lua")
local nn, optim, data = accel.nn, accel.optim, accel.data
local F = nn.functional

-- width, layers, heads, feed-forward, window length, batch per rank
local SIZES = { small = { 128, 2, 4, 512, 64, 16 }, large = { 1024, 8, 16, 4096, 256, 64 } }
local size = os.getenv("ACCEL_BENCH_CHARLM") or "small"
assert(SIZES[size], "ACCEL_BENCH_CHARLM: small or large, not " .. size)
local VOCAB = 96
local DIM, LAYERS, HEADS, FEED_FORWARD, SEQ, BATCH = unpack(SIZES[size])

local acc = accel.Accelerator{ mixed_precision = os.getenv("ACCEL_BENCH_PRECISION") or "no",
                                cuda_graphs = os.getenv("ACCEL_BENCH_CUDA_GRAPHS") == "1" }
accel.set_seed(0)

local file = assert(io.open("/usr/share/common-licenses/GPL-3", "rb"))
local text = file:read("*a")
file:close()
local ids = {}
for i = 1, #text do
  local b = text:byte(i)
  ids[i] = (b >= 32 and b <= 126 and b - 32 or 95) + 1  -- Embedding ids are 1-based
end
local all = accel.tensor(ids, { dtype = accel.int64 })
local n = math.floor((#ids - 1 - SEQ) / SEQ) + 1
local x = all:narrow(1, 1, n * SEQ):view(n, SEQ)
local y = all:narrow(1, 2, n * SEQ):view(n, SEQ)
local loader = data.DataLoader(data.TensorDataset(x, y), { batch_size = BATCH, shuffle = true })

local layer = { dim_feedforward = FEED_FORWARD, is_causal = true }
local model = nn.Sequential(nn.Embedding(VOCAB, DIM))
for _ = 1, LAYERS do model:append(nn.TransformerEncoderLayer(DIM, HEADS, layer)) end
model:append(nn.Linear(DIM, VOCAB))
local opt = optim.AdamW(model:parameters(), { lr = 1e-3 })
model, opt, loader = acc:prepare(model, opt, loader)

bench.train(acc, loader, acc:train_step(function(xb, yb)
  local loss = F.cross_entropy(model(xb):view(-1, VOCAB), yb:view(-1))
  acc:backward(loss)
  opt:step()
  opt:zero_grad()
  return loss
end))
