-- W3 char-lm: embedding 96 -> 128, two causal Transformer encoder layers
-- (4 heads, feed-forward 512, PyTorch's defaults otherwise), a linear head
-- to 96; windows of 64 characters of GPL-3 (byte b -> b - 32 for printable
-- ASCII, 95 otherwise), batch 16 per rank, AdamW lr 1e-3. Twin of
-- bench/cpp/char_lm.cpp and bench/python/char_lm.py.
--   accel-run bench/workloads/char_lm.lua --nproc 2 --threads 1 [-- warmup window windows]
local bench = dofile(arg[0]:match("^(.*/)") .. "bench.lua")
local nn, optim, data = accel.nn, accel.optim, accel.data
local F = nn.functional

local VOCAB, DIM, SEQ = 96, 128, 64

local acc = accel.Accelerator{}
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
local loader = data.DataLoader(data.TensorDataset(x, y), { batch_size = 16, shuffle = true })

local layer = { dim_feedforward = 512, is_causal = true }
local model = nn.Sequential(nn.Embedding(VOCAB, DIM), nn.TransformerEncoderLayer(DIM, 4, layer),
                            nn.TransformerEncoderLayer(DIM, 4, layer), nn.Linear(DIM, VOCAB))
local opt = optim.AdamW(model:parameters(), { lr = 1e-3 })
model, opt, loader = acc:prepare(model, opt, loader)

bench.train(acc, loader, function(xb, yb)
  local loss = F.cross_entropy(model(xb):view(-1, VOCAB), yb:view(-1))
  acc:backward(loss)
  opt:step()
  opt:zero_grad()
  return loss:item()
end)
