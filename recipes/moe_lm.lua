-- A Mixtral-architecture model (a mixture of experts in every decoder
-- layer) trained with its experts split over 2 ranks: expert parallelism
-- (EP 2). accel.parallel.expert_parallel gives each ep rank half the
-- experts before the optimizer is made; each layer routes its tokens as
-- one process does and sends every token to the rank holding its expert
-- (an all-to-all, the counts first), so no expert runs on every rank. The
-- other weights are FSDP over dp_shard (which ep borrows its ranks from),
-- the experts' gradients summed over the ranks that hold them. The loop is
-- one process's. At the end it saves the training state (OUT/state,
-- save_state: each expert's weights and AdamW state once, by the first
-- rank holding it, under the whole model's names; load_state resumes it on
-- this mesh, another ep size or one process) and the full model
-- (OUT/model, save_model: every rank's experts gathered under the whole
-- model's names, as one process writes them).
--   accel-run recipes/moe_lm.lua --nproc 2 [-- key=value ...]   (or --nproc 4: EP 2 x FSDP 4)
-- Keys (defaults): steps=40 layers=2 hidden=64 heads=4 kv_heads=2
-- intermediate=128 experts=4 top_k=2 seq=32 batch=8 (rows a step, over all
-- ranks) lr=3e-3 every=10 (steps between reports)
-- text=/usr/share/common-licenses/GPL-3 (any text file, read character by
-- character) out=runs/moe_lm. The mesh is dp_shard = the processes, ep 2,
-- unless the launch gives sizes (--parallelism-config-ep-size ...).
local optim, data = accel.optim, accel.data
local args = require("accel.args")

local o = args.key_values("moe_lm.lua", arg, {
  steps = 40, layers = 2, hidden = 64, heads = 4, kv_heads = 2, intermediate = 128, experts = 4, top_k = 2,
  seq = 32, batch = 8, lr = 3e-3, every = 10, text = "/usr/share/common-licenses/GPL-3", out = "runs/moe_lm",
}, { lr = "number", text = "string", out = "string" })

local acc = accel.Accelerator{
  parallelism_config = accel.ParallelismConfig.from_launch()
    or accel.ParallelismConfig{ dp_shard_size = accel.PartialState().num_processes, ep_size = 2 },
}
local mesh = acc.mesh
accel.set_seed(0)

local text = data.TextDataset(o.text, { seq_len = o.seq, level = "char", stride = 16 })
local per_rank = o.batch / mesh.dp.size
if per_rank % 1 ~= 0 then
  args.error(string.format("moe_lm.lua: batch=%d must divide by dp %d", o.batch, mesh.dp.size))
end
local loader = acc:prepare(data.DataLoader(text, { batch_size = per_rank, shuffle = true, drop_last = true }))

-- Every rank builds the same model (the seed), then keeps its experts.
local model = accel.models.from_config{
  model_type = "mixtral", vocab_size = text.vocab.vocab_size, hidden_size = o.hidden,
  intermediate_size = o.intermediate, num_hidden_layers = o.layers, num_attention_heads = o.heads,
  num_key_value_heads = o.kv_heads, num_local_experts = o.experts, num_experts_per_tok = o.top_k,
  max_position_embeddings = o.seq,
}
local count = model:num_parameters()
model = accel.parallel.expert_parallel(model, mesh)
local opt = optim.AdamW(model:parameters(), { lr = o.lr, weight_decay = 0.01 })
model, opt = acc:prepare(model, opt)
acc:print(string.format("%d characters, vocabulary of %d, %.2fM parameters; mesh dp_shard %d, ep %d: each rank holds "
                        .. "%d of the %d experts of each layer", text.ids:numel(), text.vocab.vocab_size, count / 1e6,
                        mesh.dp_shard.size, mesh.ep.size, #model.model.layers[1].block_sparse_moe.experts, o.experts))

local step, summed, seen = 0, 0, 0
while step < o.steps do
  for x in loader:iter() do
    local ids = x - 1  -- the text's ids are 1-based, the model's 0-based
    local out = model{ input_ids = ids, labels = ids }
    acc:backward(out.loss)
    acc:clip_grad_norm(model:parameters(), 1.0)  -- the global norm, experts of every rank counted once
    opt:step()
    opt:zero_grad()
    local loss = out.loss:detach():clone():view(1)
    mesh.dp:all_reduce(loss, "mean")
    summed, seen, step = summed + loss:item(), seen + 1, step + 1
    if step % o.every == 0 or step == o.steps then
      acc:print(string.format("step %4d  loss %.3f", step, summed / seen))
      summed, seen = 0, 0
    end
    if step == o.steps then break end
  end
end

acc:save_state(o.out .. "/state")
acc:save_model(model, o.out .. "/model")
acc:print(string.format("full model (all %d experts of each layer) in %s/model", o.experts, o.out))
acc:end_training()
