-- One rank of a char-level transformer on the GPU, for the comparison with
-- PyTorch's own loop (charlm_parity.py, test_gpu_charlm_parity.sh): writes
-- the initial weights to DIR/model.safetensors, then prints "step K LOSS"
-- for 20 AdamW steps over the first 20 batches of 16 windows of 64
-- characters of GPL-3, in order. Dropout is off so that no draw differs.
--   accel-run tests/gpu/charlm_parity.lua -- DIR
local nn, F = accel.nn, accel.nn.functional
local VOCAB, DIM, SEQ, STEPS = 96, 128, 64, 20
local dir = assert(arg[1], "usage: charlm_parity.lua -- DIR")

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
local all = accel.LongTensor(ids)
local n = STEPS * 16
local x = all:narrow(1, 1, n * SEQ):view(n, SEQ)
local y = all:narrow(1, 2, n * SEQ):view(n, SEQ)
local loader = accel.data.DataLoader(accel.data.TensorDataset(x, y), { batch_size = 16 })

local layer = { dim_feedforward = 512, is_causal = true, dropout = 0 }
local model = nn.Sequential(nn.Embedding(VOCAB, DIM), nn.TransformerEncoderLayer(DIM, 4, layer),
                            nn.TransformerEncoderLayer(DIM, 4, layer), nn.Linear(DIM, VOCAB))
acc:save_model(model, dir)
local opt = accel.optim.AdamW(model:parameters(), { lr = 1e-3 })
model, opt, loader = acc:prepare(model, opt, loader)
local step = 0
for xb, yb in loader:iter() do
  local loss = F.cross_entropy(model(xb):view(-1, VOCAB), yb:view(-1))
  acc:backward(loss)
  opt:step()
  opt:zero_grad()
  step = step + 1
  print(string.format("step %d %.9g %s", step, loss:item(), xb.device))
end
