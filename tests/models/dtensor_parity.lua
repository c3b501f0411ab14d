-- accel's side of test_dtensor_parity.sh: the tiny Llama that
-- dtensor_parity.py made, trained as it trains it (the same ids, AdamW
-- settings and steps) under accel's tensor parallelism over the ranks
-- (llama's own plan: logits gathered, F.cross_entropy), or with sequence
-- parallelism too (llama's sp_plan). The main process prints the loss of
-- every step as one JSON array.
--   accel-run dtensor_parity.lua --nproc 2 -- DIR tp|sp   (TP 2)
local F = accel.nn.functional
local ck = require("accel.core").formats
local dir, mode = arg[1], arg[2]
assert(mode == "tp" or mode == "sp", "usage: dtensor_parity.lua -- DIR tp|sp")
local STEPS, ROWS, T = 10, 4, 16  -- as dtensor_parity.py

local acc = accel.Accelerator{ parallelism_config = accel.ParallelismConfig{ tp_size = 2 } }
local model = accel.models.from_pretrained(dir .. "/model"):train()
local vocab = model.config.vocab_size
model = accel.parallel.tensor_parallel(model, acc.mesh, nil, { sequence_parallel = mode == "sp" })
local opt = accel.optim.AdamW(model:parameters(), { lr = 1e-2, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 0.01 })
model, opt = acc:prepare(model, opt)
local ids = ck.read_safetensors(dir .. "/data.safetensors").ids

local losses = {}
for step = 1, STEPS do
  local rows = ids:narrow(1, (step - 1) * ROWS + 1, ROWS)
  local logits = model{ input_ids = rows:narrow(2, 1, T) }.logits
  local loss = F.cross_entropy(logits:reshape(-1, vocab), rows:narrow(2, 2, T):reshape(-1) + 1)  -- 1-based classes
  acc:backward(loss)
  opt:step()
  opt:zero_grad()
  losses[step] = string.format("%.9g", loss:item())
end
acc:print("[" .. table.concat(losses, ", ") .. "]")
