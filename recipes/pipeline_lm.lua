-- A Llama-architecture model trained through a pipeline of 2 stages on 2
-- ranks (on 4, PP 2 x FSDP 2: each stage sharded over the pair of ranks
-- holding it): prepare cuts it into stages (the embeddings and the first
-- layers on pp rank 0, the rest, the norm and the head on pp rank 1), the loop is the
-- one a single process runs -- model{input_ids, labels}, acc:backward,
-- clipping, the optimizer's step -- and acc:backward(out.loss) runs the
-- schedule over micro-batches of the batch, activations going forward
-- between the ranks and their gradients back. At the end an evaluation
-- (model:eval()) runs the schedule's forwards alone on the text's first
-- rows, then it saves a checkpoint (OUT/checkpoint, acc:save_state: each
-- pp rank's stages under the whole model's names, loadable on another
-- stage cut or on one process) and the full model (OUT/model, save_model).
--   accel-run recipes/pipeline_lm.lua --nproc 2 [-- key=value ...]   (or --nproc 4)
-- Keys (defaults): steps=40 layers=4 hidden=64 heads=4 kv_heads=2
-- intermediate=128 seq=32 batch=8 (rows a step, over all data-parallel
-- ranks) schedule=1F1B microbatches=4 lr=3e-3 every=10 (steps between
-- reports) text=/usr/share/common-licenses/GPL-3 (any text file, read
-- character by character) out=runs/pipeline_lm. The mesh is pp 2 (pp 2 x
-- dp_shard 2 on 4 processes) unless the launch gives sizes
-- (--parallelism-config-pp-size 2 --parallelism-config-dp-replicate-size 2
-- --nproc 4 makes PP 2 x DP 2, for one).
local optim, data = accel.optim, accel.data
local args = require("accel.args")

local o = args.key_values("pipeline_lm.lua", arg, {
  steps = 40, layers = 4, hidden = 64, heads = 4, kv_heads = 2, intermediate = 128, seq = 32, batch = 8,
  schedule = "1F1B", microbatches = 4, lr = 3e-3, every = 10, text = "/usr/share/common-licenses/GPL-3",
  out = "runs/pipeline_lm",
}, { lr = "number", text = "string", schedule = "string", out = "string" })

local acc = accel.Accelerator{
  parallelism_config = accel.ParallelismConfig.from_launch()
    or accel.ParallelismConfig{ pp_size = 2, dp_shard_size = accel.PartialState().num_processes == 4 and 2 or 1,
                                pp_schedule = o.schedule, pp_microbatches = o.microbatches },
}
local mesh = acc.mesh
accel.set_seed(0)

-- Characters of the text; the loader shards over dp only: the ranks of a
-- pipeline (one per stage) see the same rows.
local text = data.TextDataset(o.text, { seq_len = o.seq, level = "char", stride = 16 })
local per_rank = o.batch / mesh.dp.size
if per_rank % 1 ~= 0 then
  args.error(string.format("pipeline_lm.lua: batch=%d must divide by dp %d", o.batch, mesh.dp.size))
end
local first_rows = text.ids:narrow(1, 1, o.seq * o.batch):view(o.batch, o.seq) - 1  -- ids from 0
local loader = acc:prepare(data.DataLoader(text, { batch_size = per_rank, shuffle = true, drop_last = true }))

local model = accel.models.from_config{
  model_type = "llama", vocab_size = text.vocab.vocab_size, hidden_size = o.hidden, intermediate_size = o.intermediate,
  num_hidden_layers = o.layers, num_attention_heads = o.heads, num_key_value_heads = o.kv_heads,
  max_position_embeddings = o.seq,
}
local count = model:num_parameters()
local opt = optim.AdamW(model:parameters(), { lr = o.lr, weight_decay = 0.01 })
model, opt = acc:prepare(model, opt)
acc:print(string.format("%d characters, vocabulary of %d, %.2fM parameters; mesh pp %d x dp %d%s, %s over %d "
                        .. "micro-batches; this rank's stages hold %s", text.ids:numel(), text.vocab.vocab_size,
                        count / 1e6, mesh.pp.size, mesh.dp.size,
                        mesh.dp_shard.size > 1 and string.format(" (FSDP over dp_shard %d)", mesh.dp_shard.size) or "",
                        mesh.config.pp_schedule,
                        mesh.config.pp_microbatches, table.concat(model:layer_names(), ", ")))

local step, summed, seen = 0, 0, 0
while step < o.steps do
  for x in loader:iter() do
    local ids = x - 1  -- the text's ids are 1-based, the model's 0-based
    local out = model{ input_ids = ids, labels = ids }
    acc:backward(out.loss)  -- the schedule: every micro-batch's forward and backward
    acc:clip_grad_norm(model:parameters(), 1.0)  -- the global norm, over both stages
    opt:step()
    opt:zero_grad()
    local loss = out.loss:clone():view(1)  -- the batch's loss, on every rank of the pipeline
    mesh.dp:all_reduce(loss, "mean")
    summed, seen, step = summed + loss:item(), seen + 1, step + 1
    if step % o.every == 0 or step == o.steps then
      acc:print(string.format("step %4d  loss %.3f", step, summed / seen))
      summed, seen = 0, 0
    end
    if step == o.steps then break end
  end
end

model:eval()
acc:print(string.format("evaluation loss %.3f (the text's first %d rows)",
                        model{ input_ids = first_rows, labels = first_rows }.loss:item(), o.batch))
acc:save_state(o.out .. "/checkpoint")
acc:save_model(model, o.out .. "/model")
acc:print(string.format("checkpoint saved in %s/checkpoint, full model in %s/model", o.out, o.out))
acc:end_training()
