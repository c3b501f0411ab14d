-- Each parallel layout of 4 ranks against plain data parallel: what a rank
-- holds of a ~100M-parameter Llama's parameters, gradients and AdamW state
-- after a step, next to the share the layout promises (a pipeline rank's:
-- its stages', by the even stage cut), the step's allocator peak, and
-- training samples/s relative to plain data parallel.
--   accel-run bench/parallel/layouts.lua --nproc 4 --threads 1 [--backend mpi] -- \
--     [smoke] [rows=2 seq=128 warmup=1 steps=3]
-- rows and seq: one step's batch on each data-parallel rank (a cp group
-- splits its rows' sequence; a pipeline takes at least pp rows, one
-- micro-batch each). smoke: a 4-layer, 256-wide model, 8 heads, to try it.
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
-- dp_replicate, dp_shard, cp, tp, pp; the first is plain data parallel (no
-- mesh). A pipeline runs 1F1B over pp micro-batches; late_optimizer makes
-- AdamW after prepare, over the stages' parameters alone.
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
  { name = "PP 4", pp = 4 },
  { name = "PP 2 x DP 2", pp = 2, dp_replicate = 2 },
  { name = "PP 2 x FSDP 2", pp = 2, dp_shard = 2 },
  { name = "PP 2 x TP 2", pp = 2, tp = 2 },
  { name = "PP 2 x DP 2, AdamW after prepare", pp = 2, dp_replicate = 2, late_optimizer = true },
}

local function bytes(t)
  return t and t:numel() * t:element_size() or 0
end

-- The pipeline's layers as the stage cut counts them: the embeddings,
-- each decoder layer, the final norm and the head; and the layer a
-- parameter of the whole model belongs to.
local function pipeline_layers()
  local names = { "embed_tokens" }
  for i = 0, config.num_hidden_layers - 1 do names[#names + 1] = "layers." .. i end
  names[#names + 1], names[#names + 2] = "norm", "lm_head"
  return names
end
local function layer_of(name)
  local rest = name:gsub("^model%.", "")
  return rest:match("^(layers%.%d+)%.") or rest:match("^([^.]+)%.")
end

-- The layers pp rank `pp_rank` (0-based) holds of `pp` stages, cut evenly
-- (the first #layers % pp stages one layer more; stage s on pp rank s - 1),
-- as a set; nil without a pipeline (every layer).
local function held_layers(pp, pp_rank)
  if not pp then return nil end
  local names, held, first = pipeline_layers(), {}, 1
  for s = 0, pp - 1 do
    local size = math.floor(#names / pp) + (s < #names % pp and 1 or 0)
    for i = first, first + size - 1 do
      if s == pp_rank then held[names[i]] = true end
    end
    first = first + size
  end
  return held
end

-- The share a layout promises, in elements of the whole model's: a
-- pipeline rank its stages' parameters; tp splits every matrix (embedding,
-- projections, lm_head) and keeps the norms whole; dp_shard then divides
-- what tp left, and with it cp (FSDP's shards span dp_shard x cp);
-- replicas hold it all, and so do cp ranks without FSDP.
local function promised_numel(model, l, held)
  local whole, norms = 0, 0
  for name, p in model:named_parameters() do
    local layer = layer_of(name)
    if held and not (layer == "embed_tokens" or layer == "norm" or layer == "lm_head" or layer:match("^layers%.%d+$")) then
      error("layouts.lua: parameter " .. name .. " is in none of the pipeline's layers", 0)
    end
    if not held or held[layer] then
      whole = whole + p:numel()
      if name:find("norm") then norms = norms + p:numel() end
    end
  end
  local shards = l.dp_shard and l.dp_shard * (l.cp or 1) or 1
  return ((whole - norms) / (l.tp or 1) + norms) / shards
end

-- The tensors a rank keeps alive: the model's own parameters (empty
-- between steps under FSDP; a pipeline's are its stages') and the
-- optimizer's (under FSDP the flat shards it steps; made before a
-- pipeline's prepare, the whole model's), each counted once (is_set_to).
local function live_parameters(model, opt)
  local list = {}
  local function add(t)
    for _, seen in ipairs(list) do
      if seen:numel() > 0 and t:is_set_to(seen) then return end
    end
    list[#list + 1] = t
  end
  for _, p in ipairs(model:parameters()) do add(p) end
  for g = 1, opt.optimizer:num_param_groups() do
    for _, p in ipairs(opt.optimizer:params(g)) do add(p) end
  end
  return list
end

-- What this rank holds after a step, before zero_grad: those parameters
-- and their .grad, and the optimizer's state; `idle`, of the parameters,
-- those with no gradient (the other stages' a pipeline's optimizer keeps).
local function held_bytes(model, opt)
  local held = { params = 0, grads = 0, optim = 0, idle = 0 }
  for _, p in ipairs(live_parameters(model, opt)) do
    held.params, held.grads = held.params + bytes(p), held.grads + bytes(p.grad)
    if not p.grad then held.idle = held.idle + bytes(p) end
  end
  for key, t in pairs(opt.optimizer:state_dict()) do
    if key:sub(1, 6) == "state." then held.optim = held.optim + bytes(t) end
  end
  return held
end

-- The bytes tensors hold now, those no longer reachable collected first.
local function allocated()
  collectgarbage()
  collectgarbage()
  return accel.cpu_memory_stats().allocated_bytes
end

local function run(l)
  local meshed = l.tp or l.cp or l.dp_shard or l.dp_replicate or l.pp
  local acc = accel.Accelerator{ fsdp_plugin = l.dp_shard and by_layer or nil,
    parallelism_config = meshed and accel.ParallelismConfig{
      dp_replicate_size = l.dp_replicate, dp_shard_size = l.dp_shard, cp_size = l.cp, tp_size = l.tp,
      pp_size = l.pp } or nil }
  local mesh = acc.mesh
  -- A pipeline's batch: pp micro-batches (1F1B's fewest), so at least pp rows.
  local rows = l.pp and math.max(o.rows, l.pp) or o.rows
  if rows % (l.pp or 1) ~= 0 then
    error(string.format("layouts.lua: %s cuts a batch of rows=%d into %d micro-batches", l.name, rows, l.pp), 0)
  end
  accel.set_seed(0)
  local model = accel.models.from_config(config):train()
  local promised = promised_numel(model, l, held_layers(l.pp, l.pp and mesh.pp.rank))
  if l.tp then model = accel.parallel.tensor_parallel(model, mesh) end
  if l.cp then model = accel.parallel.context_parallel(model, mesh) end
  local opt
  if l.late_optimizer then
    model = acc:prepare(model)
    opt = acc:prepare(accel.optim.AdamW(model:parameters(), { lr = 1e-4 }))
  else
    model, opt = acc:prepare(model, accel.optim.AdamW(model:parameters(), { lr = 1e-4 }))
  end
  local dp_size, dp_rank = mesh and mesh.dp.size or acc.num_processes, mesh and mesh.dp.rank or acc.process_index
  -- Random tokens, the same on the ranks of one dp rank (its tp, cp and pp groups).
  accel.set_seed(1 + dp_rank)
  local ids = accel.randint(0, config.vocab_size, { rows, o.seq + 1 })
  local inputs, targets = ids:narrow(2, 1, o.seq), ids:narrow(2, 2, o.seq)
  local start, held, before, peak
  for step = 1, o.warmup + o.steps do
    if step == o.warmup + 1 then
      acc:wait_for_everyone()
      start = accel.time()
    end
    local last = step == o.warmup + o.steps
    if last then
      before = allocated()
      accel.reset_peak_cpu_memory_stats()
    end
    local loss
    if l.pp then
      loss = model{ input_ids = inputs, labels = inputs }.loss  -- deferred: backward runs the schedule
    elseif l.cp then
      loss = model(accel.parallel.context_parallel_split({ input_ids = inputs, shift_labels = targets }, mesh)).loss
    else
      local logits = model{ input_ids = inputs }.logits
      loss = F.cross_entropy(logits:reshape(-1, config.vocab_size), targets:reshape(-1) + 1)
    end
    acc:backward(loss)
    if last then peak = accel.cpu_memory_stats().peak_allocated_bytes - before end
    opt:step()
    if last then held = held_bytes(model, opt) end
    opt:zero_grad()
  end
  acc:wait_for_everyone()
  local seconds = accel.time() - start
  -- actual/promised (AdamW keeps two tensors per parameter), the idle
  -- parameters' and the step's peak MiB.
  local element = 4
  local figures = accel.tensor({ held.params / (promised * element), held.grads / (promised * element),
                                 held.optim / (2 * promised * element), held.idle / 2 ^ 20,
                                 peak / 2 ^ 20 })
  local high, low = acc:reduce(figures:clone(), "max"), acc:reduce(figures:clone(), "min")
  local promised_high, promised_low = acc:reduce(accel.tensor({ promised }), "max"), acc:reduce(accel.tensor({ promised }), "min")
  local result = { name = l.name, promised = { promised_low:item(), promised_high:item() }, held = held, high = high,
                   low = low, samples_per_s = rows * dp_size * o.steps / seconds }
  acc:free_memory()
  return result
end

local function mib(b) return b / 2 ^ 20 end
local results = {}
for _, l in ipairs(layouts) do
  results[#results + 1] = run(l)
  if accel.PartialState().is_main_process then io.stderr:write("done: ", l.name, "\n") end
end
if accel.PartialState().is_main_process then
  local base = results[1].samples_per_s
  print(string.format("model: %d layers, hidden %d, vocab %d; batch %d x %d per dp rank (a pipeline's at least pp rows, "
                      .. "pp micro-batches of 1F1B); %d timed steps after %d",
                      config.num_hidden_layers, config.hidden_size, config.vocab_size, o.rows, o.seq, o.steps, o.warmup))
  print("| layout | promised params/rank | params MiB (rank 0) | grads MiB | AdamW state MiB "
        .. "| actual/promised params (min-max over ranks) | grads | state | of the params, without a gradient, MiB "
        .. "| step's peak over its start, MiB | samples/s | vs DP 4 |")
  print("|---|---|---|---|---|---|---|---|---|---|---|---|")
  for _, r in ipairs(results) do
    local function span(k, format)
      return string.format(format .. "-" .. format, r.low[k]:item(), r.high[k]:item())
    end
    local promised = r.promised[1] == r.promised[2] and string.format("%.1fM", r.promised[1] / 1e6)
                     or string.format("%.1f-%.1fM", r.promised[1] / 1e6, r.promised[2] / 1e6)
    print(string.format("| %s | %s | %.1f | %.1f | %.1f | %s | %s | %s | %s | %s | %.2f | %.2f |", r.name, promised,
                        mib(r.held.params), mib(r.held.grads), mib(r.held.optim), span(1, "%.3f"), span(2, "%.3f"),
                        span(3, "%.3f"), span(4, "%.1f"), span(5, "%.0f"), r.samples_per_s, r.samples_per_s / base))
  end
end
