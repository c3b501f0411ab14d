-- Each parallel layout of 4 ranks against plain data parallel: what a rank
-- holds of a ~100M-parameter Llama's parameters, gradients and AdamW state
-- after a step, next to the share the layout promises, and training
-- samples/s relative to plain data parallel.
--   accel-run bench/parallel/layouts.lua --nproc 4 --threads 1 [--backend mpi] -- \
--     [smoke] [rows=2 seq=128 warmup=1 steps=3]
-- rows and seq: one step's batch on each data-parallel rank (a cp group
-- splits its rows' sequence). smoke: a 4-layer, 256-wide model, 8 heads, to try it.
-- Rank 0 prints a markdown table; bench/README.md says how to read it.
local F = accel.nn.functional

local config = { model_type = "llama", vocab_size = 32000, hidden_size = 768, intermediate_size = 2048,
                 num_hidden_layers = 12, num_attention_heads = 12, num_key_value_heads = 4,
                 max_position_embeddings = 2048 }
local bench_options = dofile(arg[0]:match("(.*/)") .. "bench_options.lua")
local o = bench_options.parse("layouts.lua", { rows = 2, seq = 128, warmup = 1, steps = 3 }, {
  smoke = function()
    config.hidden_size, config.intermediate_size, config.num_hidden_layers, config.vocab_size = 256, 512, 4, 8000
    config.num_attention_heads = 8
  end,
})

local by_layer = accel.FullyShardedDataParallelPlugin{ transformer_layer_cls = "LlamaDecoderLayer" }
-- dp_replicate, dp_shard, cp, tp; the first is plain data parallel (no mesh).
local layouts = {
  { name = "DP 4" },
  { name = "TP 2 x DP 2", dp_replicate = 2, tp = 2 },
  { name = "TP 4", tp = 4 },
  { name = "FSDP 4", dp_shard = 4 },
  { name = "HSDP 2 x 2", dp_replicate = 2, dp_shard = 2 },
  { name = "TP 2 x FSDP 2", dp_shard = 2, tp = 2 },
  { name = "CP 2 x DP 2", dp_replicate = 2, cp = 2 },
  { name = "CP 2 x TP 2", cp = 2, tp = 2 },
  { name = "FSDP 2 x CP 2", dp_shard = 2, cp = 2 },
}

local function bytes(t)
  return t and t:numel() * t:element_size() or 0
end

-- The share a layout promises, in elements of the whole model's: tp splits
-- every matrix (embedding, projections, lm_head) and keeps the norms whole;
-- dp_shard then divides what tp left, and with it cp (FSDP's shards span
-- dp_shard x cp); replicas hold it all, and so do cp ranks without FSDP.
local function promised_numel(model, l)
  local whole, norms = 0, 0
  for name, p in model:named_parameters() do
    whole = whole + p:numel()
    if name:find("norm") then norms = norms + p:numel() end
  end
  local shards = l.dp_shard and l.dp_shard * (l.cp or 1) or 1
  return ((whole - norms) / (l.tp or 1) + norms) / shards
end

-- What this rank holds after a step, before zero_grad: the model's own
-- parameters (empty between steps under FSDP) and their .grad; sharded, the
-- flat shards the optimizer steps and their .grad; and the optimizer's state.
local function held_bytes(acc, model, opt)
  local held = { params = 0, grads = 0, optim = 0 }
  for _, p in ipairs(model:parameters()) do
    held.params, held.grads = held.params + bytes(p), held.grads + bytes(p.grad)
  end
  if acc.sharding then
    for g = 1, opt.optimizer:num_param_groups() do
      for _, shard in ipairs(opt.optimizer:params(g)) do
        held.params, held.grads = held.params + bytes(shard), held.grads + bytes(shard.grad)
      end
    end
  end
  for key, t in pairs(opt.optimizer:state_dict()) do
    if key:sub(1, 6) == "state." then held.optim = held.optim + bytes(t) end
  end
  return held
end

local function run(l)
  local meshed = l.tp or l.cp or l.dp_shard or l.dp_replicate
  local acc = accel.Accelerator{ fsdp_plugin = l.dp_shard and by_layer or nil,
    parallelism_config = meshed and accel.ParallelismConfig{
      dp_replicate_size = l.dp_replicate, dp_shard_size = l.dp_shard, cp_size = l.cp, tp_size = l.tp } or nil }
  local mesh = acc.mesh
  accel.set_seed(0)
  local model = accel.models.from_config(config):train()
  local promised = promised_numel(model, l)
  if l.tp then model = accel.parallel.tensor_parallel(model, mesh) end
  if l.cp then model = accel.parallel.context_parallel(model, mesh) end
  local opt = accel.optim.AdamW(model:parameters(), { lr = 1e-4 })
  model, opt = acc:prepare(model, opt)
  local dp_size, dp_rank = mesh and mesh.dp.size or acc.num_processes, mesh and mesh.dp.rank or acc.process_index
  -- Random tokens, the same on the ranks of one dp rank (its tp and cp groups).
  accel.set_seed(1 + dp_rank)
  local ids = accel.randint(0, config.vocab_size, { o.rows, o.seq + 1 })
  local inputs, targets = ids:narrow(2, 1, o.seq), ids:narrow(2, 2, o.seq)
  local start, held
  for step = 1, o.warmup + o.steps do
    if step == o.warmup + 1 then
      acc:wait_for_everyone()
      start = accel.time()
    end
    local loss
    if l.cp then
      loss = model(accel.parallel.context_parallel_split({ input_ids = inputs, shift_labels = targets }, mesh)).loss
    else
      local logits = model{ input_ids = inputs }.logits
      loss = F.cross_entropy(logits:reshape(-1, config.vocab_size), targets:reshape(-1) + 1)
    end
    acc:backward(loss)
    opt:step()
    if step == o.warmup + o.steps then held = held_bytes(acc, model, opt) end
    opt:zero_grad()
  end
  acc:wait_for_everyone()
  local seconds = accel.time() - start
  -- The worst rank's actual/promised (AdamW keeps two tensors per parameter).
  local element = 4
  local ratios = accel.tensor({ held.params / (promised * element), held.grads / (promised * element),
                                held.optim / (2 * promised * element) })
  local high, low = acc:reduce(ratios:clone(), "max"), acc:reduce(ratios:clone(), "min")
  local result = { name = l.name, promised = promised, held = held, high = high, low = low,
                   samples_per_s = o.rows * dp_size * o.steps / seconds }
  acc:free_memory()
  collectgarbage()
  return result
end

local function mib(b) return b / 2 ^ 20 end
local rows = {}
for _, l in ipairs(layouts) do
  rows[#rows + 1] = run(l)
  if accel.PartialState().is_main_process then io.stderr:write("done: ", l.name, "\n") end
end
if accel.PartialState().is_main_process then
  local base = rows[1].samples_per_s
  print(string.format("model: %d layers, hidden %d, vocab %d; batch %d x %d per dp rank; %d timed steps after %d",
                      config.num_hidden_layers, config.hidden_size, config.vocab_size, o.rows, o.seq, o.steps, o.warmup))
  print("| layout | promised params/rank | params MiB (rank 0) | grads MiB | AdamW state MiB "
        .. "| actual/promised params (min-max over ranks) | grads | state | samples/s | vs DP 4 |")
  print("|---|---|---|---|---|---|---|---|---|---|")
  for _, r in ipairs(rows) do
    local function span(k) return string.format("%.3f-%.3f", r.low[k]:item(), r.high[k]:item()) end
    print(string.format("| %s | %.1fM | %.1f | %.1f | %.1f | %s | %s | %s | %.2f | %.2f |", r.name, r.promised / 1e6,
                        mib(r.held.params), mib(r.held.grads), mib(r.held.optim), span(1), span(2), span(3),
                        r.samples_per_s, r.samples_per_s / base))
  end
end
