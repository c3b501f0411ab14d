-- A Llama-architecture model trained with TP 2 x FSDP 2 on 4 ranks: each
-- layer's weights are split over a tensor-parallel pair of ranks (Megatron's
-- column and row splits, llama's own plan), and each rank's slices are
-- sharded again over a pair of data-parallel ranks (FSDP's FULL_SHARD, one
-- unit per decoder layer). No rank holds full logits: lm_head keeps its
-- vocabulary slice and the loss is the vocabulary-parallel cross-entropy.
--   accel-run recipes/parallel_lm.lua --nproc 4 [-- key=value ...]
-- Keys (defaults): steps=60 layers=2 hidden=128 heads=4 kv_heads=2
-- intermediate=256 seq=64 batch=8 (rows a step, over all data-parallel
-- ranks) accum=2 lr=3e-3 every=10 (steps between reports)
-- text=/usr/share/common-licenses/GPL-3 (any text file, read character by
-- character) out=runs/parallel_lm. The mesh is tp 2 x dp_shard 2 unless the
-- launch gives sizes (--parallelism-config-tp-size 2
-- --parallelism-config-dp-replicate-size 2 makes TP 2 x DP 2, for one). At
-- the end it saves a checkpoint (OUT/checkpoint, acc:save_state: the full
-- state, loadable on any mesh) and the full model (OUT/model, save_model).
local optim, data = accel.optim, accel.data
local args = require("accel.args")

local o = args.key_values("parallel_lm.lua", arg, {
  steps = 60, layers = 2, hidden = 128, heads = 4, kv_heads = 2, intermediate = 256, seq = 64, batch = 8, accum = 2,
  lr = 3e-3, every = 10, text = "/usr/share/common-licenses/GPL-3", out = "runs/parallel_lm",
}, { lr = "number", text = "string", out = "string" })

-- The launch's sizes win (accel-run --parallelism-config-*); else TP 2 x FSDP 2.
local acc = accel.Accelerator{
  parallelism_config = accel.ParallelismConfig.from_launch() or accel.ParallelismConfig{ tp_size = 2, dp_shard_size = 2 },
  gradient_accumulation_steps = o.accum,
  fsdp_plugin = accel.FullyShardedDataParallelPlugin{ transformer_layer_cls = "LlamaDecoderLayer" },
}
local mesh = acc.mesh
accel.set_seed(0)

-- Characters of the text; the loader shards over dp only (the ranks of a tp
-- group see the same rows), each rank taking its part of a micro-step's rows.
local text = data.TextDataset(o.text, { seq_len = o.seq, level = "char", stride = 16 })
local per_rank = o.batch / mesh.dp.size / o.accum
if per_rank % 1 ~= 0 then
  args.error(string.format("parallel_lm.lua: batch=%d must divide by dp %d x accum %d", o.batch, mesh.dp.size, o.accum))
end
local loader = acc:prepare(data.DataLoader(text, { batch_size = per_rank, shuffle = true, drop_last = true }))

-- The vocabulary padded to a multiple of 8 so that it splits over tp; the
-- text's ids are 1-based, the model's 0-based.
local vocab = math.ceil(text.vocab.vocab_size / 8) * 8
local model = accel.models.from_config{
  model_type = "llama", vocab_size = vocab, hidden_size = o.hidden, intermediate_size = o.intermediate,
  num_hidden_layers = o.layers, num_attention_heads = o.heads, num_key_value_heads = o.kv_heads,
  max_position_embeddings = o.seq,
}
local count = model:num_parameters()
-- Llama's plan with lm_head's logits left split over the vocabulary.
local plan = {}
for k, v in pairs(require("accel.models.llama").tp_plan) do plan[k] = v end
plan.lm_head = "colwise"
model = accel.parallel.tensor_parallel(model, mesh, plan)  -- TP first, then prepare shards over dp_shard

local opt = optim.AdamW(model:parameters(), { lr = o.lr, weight_decay = 0.01 })
local sched = optim.lr_scheduler.cosine(opt, { warmup = math.max(1, math.floor(o.steps / 10)), total = o.steps,
                                              min_lr = o.lr / 10 })
model, opt, sched = acc:prepare(model, opt, sched)
acc:print(string.format("%d characters, vocabulary of %d (padded to %d), %.2fM parameters; mesh dp_replicate %d x "
                        .. "dp_shard %d x tp %d; %d rows a step in %d micro-steps", text.ids:numel(),
                        text.vocab.vocab_size, vocab, count / 1e6, mesh.dp_replicate.size, mesh.dp_shard.size,
                        mesh.tp.size, o.batch, o.accum))

local step, micro, summed = 0, 0, 0
local bar = accel.progress(o.steps, { desc = "steps" })
while step < o.steps do
  for x, y in loader:iter() do
    acc:accumulate(model, function()
      local logits = model{ input_ids = x - 1 }.logits  -- (rows, seq, vocab / tp): this rank's slice
      local loss = accel.parallel.vocab_parallel_cross_entropy(logits, y - 1, mesh.tp)
      acc:backward(loss)
      acc:clip_grad_norm(model:parameters(), 1.0)  -- the global norm, over tp and dp_shard
      opt:step()
      sched:step()
      opt:zero_grad()
      -- The same on every tp rank; the step's loss is the mean over dp.
      local global = loss:detach():clone():view(1)
      mesh.dp:all_reduce(global, "mean")
      summed, micro = summed + global:item(), micro + 1
    end)
    if acc.sync_gradients then
      step = step + 1
      bar:update()
      if step % o.every == 0 or step == o.steps then
        local mean = summed / micro
        bar:set_postfix{ loss = mean }
        acc:print(string.format("step %4d  loss %.3f  lr %.2e", step, mean, sched:get_last_lr()[1]))
        if step == o.steps then acc:print(string.format("final loss %.3f", mean)) end
        summed, micro = 0, 0
      end
      if step == o.steps then break end
    end
  end
end
bar:close()

-- Every rank takes part: the full state is gathered over dp_shard, then tp.
acc:save_state(o.out .. "/checkpoint")
acc:save_model(model, o.out .. "/model")
acc:print(string.format("checkpoint saved in %s/checkpoint, full model in %s/model", o.out, o.out))
acc:end_training()
