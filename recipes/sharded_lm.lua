-- A transformer language model of about 100 million parameters trained with
-- its parameters, gradients and optimizer state sharded over the ranks
-- (FSDP's FULL_SHARD, ZeRO stage 3): each rank keeps a 1/N slice of them and
-- gathers one block's full parameters only while it computes with them.
-- Only the main process builds the model with weights; the others build it
-- empty and take the main process's weights as prepare shards it, so no rank
-- but the main process ever holds the model whole.
--   accel-run recipes/sharded_lm.lua --nproc 2 [-- key=value ...]
-- Keys (defaults): steps=30 layers=14 width=768 heads=12 seq=64 batch=4
-- every=5 (steps between reports) text=/usr/share/common-licenses/GPL-3
-- (any text file, read character by character). A quick look:
--   accel-run recipes/sharded_lm.lua --nproc 2 -- steps=6 layers=2 width=64 heads=4
-- Every `every` steps it prints the mean loss and, for each rank, its
-- resident memory and the bytes of model state it holds (parameter shards,
-- their gradient slices, AdamW's state for them).
local optim, data, F = accel.optim, accel.data, accel.nn.functional
local args = require("accel.args")

local o = args.key_values("sharded_lm.lua", arg, { steps = 30, layers = 14, width = 768, heads = 12, seq = 64,
                                                    batch = 4, every = 5, text = "/usr/share/common-licenses/GPL-3" },
                          { text = "string" })

-- Sharding by FSDP's plugin: every Block is gathered and released as a unit;
-- with cpu_ram_efficient_loading, acc:build_model builds the model empty
-- (accel.init_empty_weights) on the ranks other than the main process.
local acc = accel.Accelerator{
  fsdp_plugin = accel.FullyShardedDataParallelPlugin{ sharding_strategy = "FULL_SHARD",
                                                       transformer_layer_cls = "Block",
                                                       cpu_ram_efficient_loading = true },
}
accel.set_seed(0)

local text = data.TextDataset(o.text, { seq_len = o.seq, level = "char", stride = 16 })
local vocab = text.vocab.vocab_size
local loader = acc:prepare(data.DataLoader(text, { batch_size = o.batch, shuffle = true, drop_last = true }))

local ShardedLM = dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "sharded_lm_model.lua")
local model = acc:build_model(function()
  return ShardedLM{ vocab = vocab, seq = o.seq, width = o.width, heads = o.heads, layers = o.layers }
end)
-- Counted before prepare (shapes only, so also on an empty model): sharded,
-- the model's own parameters are empty outside forward and backward.
local count = model:num_parameters()
local opt = optim.AdamW(model:parameters(), { lr = 3e-4, weight_decay = 0.01 })
-- One call: sharding points the optimizer at the model's shards.
model, opt = acc:prepare(model, opt)
acc:print(string.format("%d characters, vocabulary of %d, %.1fM parameters, %d ranks (%.0f MiB of fp32 AdamW "
                        .. "model state in all, about %.0f MiB a rank)", text.ids:numel(), vocab, count / 1e6,
                        acc.num_processes, count * 16 / 2 ^ 20, count * 16 / 2 ^ 20 / acc.num_processes))

local function resident_mib()
  for line in io.lines("/proc/self/status") do
    local kib = line:match("^VmRSS:%s*(%d+)")
    if kib then return tonumber(kib) / 1024 end
  end
  error("/proc/self/status has no VmRSS")
end

local function bytes(t)
  return t and t:numel() * t:element_size() or 0
end

-- The model state this rank holds: the shards the optimizer steps, their
-- gradient slices and the optimizer's state (of its shards only).
local function model_state_mib()
  local n = 0
  for _, shard in ipairs(opt:params()) do n = n + bytes(shard) + bytes(shard.grad) end
  for key, t in pairs(opt.optimizer:state_dict()) do
    if key:find("^state%.") then n = n + bytes(t) end
  end
  return n / 2 ^ 20
end

local step, loss_sum, loss_count = 0, 0, 0
local bar = accel.progress(o.steps, { desc = "steps" })
while step < o.steps do
  for x, y in loader:iter() do
    local loss = F.cross_entropy(model(x):view(-1, vocab), y:view(-1))
    acc:backward(loss)
    acc:clip_grad_norm(model:parameters(), 1.0)
    opt:step()
    step = step + 1
    loss_sum, loss_count = loss_sum + loss:item(), loss_count + 1
    if step % o.every == 0 or step == o.steps then
      -- Before zero_grad, so that the gradient slices count.
      local memory = acc:gather(accel.tensor({ { resident_mib(), model_state_mib() } }, { dtype = accel.float64 }))
      local mean = acc:reduce(accel.tensor(loss_sum / loss_count), "mean"):item()
      local ranks = {}
      for r = 1, memory:size(1) do
        ranks[r] = string.format("rank %d %.0f MiB resident, %.0f MiB model state", r - 1, memory[r][1]:item(),
                                 memory[r][2]:item())
      end
      bar:set_postfix{ loss = mean }
      acc:print(string.format("step %4d  loss %.3f  %s", step, mean, table.concat(ranks, "; ")))
      if step == o.steps then acc:print(string.format("final loss %.3f", mean)) end
      loss_sum, loss_count = 0, 0
    end
    opt:zero_grad()
    bar:update()
    if step == o.steps then break end
  end
end
bar:close()
acc:end_training()
