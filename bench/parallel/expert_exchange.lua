-- Expert parallelism's traffic (accel.parallel.expert_parallel) in one
-- training step of a small Mixtral, per rank: the rows its experts'
-- all-to-alls move off-rank (forward and backward) and the routing counts
-- they exchange, against what the layout promises from the router's
-- choices, and the experts' parameters, gradients and AdamW state a rank
-- holds against the whole model's / (ep x tp x R), R the dp_shard x cp ranks
-- sharing an ep place, over which FSDP shards the experts.
--   accel-run bench/parallel/expert_exchange.lua --nproc 2 --threads 1 [-- rows=2 seq=128]   # EP 2, fp32 and bf16
--   accel-run bench/parallel/expert_exchange.lua --nproc 4 --threads 1 [-- rows=2 seq=128]   # EP 4, EP 2 x FSDP 2, EP 2 x TP 2
-- rows and seq: one step's batch on each data-parallel rank.
-- Measured: each block's ep group is wrapped, so every all_to_all(x,
-- counts) call records the rows it passes to each rank and x's row bytes,
-- and the gradient of its output (kept by retain_grad) what the backward
-- sends back (engine/parallel/expert_exchange.cpp: the backward moves the
-- output's gradient along the forward's counts, reversed); a rank's own
-- rows are copied, not sent, and not counted. The counts: each call's
-- counts tensor, which exchange_counts all-gathers whole over the ep
-- group (every peer gets all of it; the backward sends none). (The ep
-- group's own counters would not do: where ep's ranks are dp_shard's the
-- two dims share one group, and FSDP's all-gathers count there too.)
-- Promised: from the
-- router's choices alone (each block's route, recorded), the (token,
-- choice) rows whose expert another rank holds (S: this rank's; R: the
-- other ranks' for this rank's experts, gathered) travel four times a step
-- (dispatch and combine, each forward and backward), 2 (S + R) rows each
-- way of hidden x the element size they travel in (the hidden states', or
-- autocast's dtype under it); and one count a
-- (peer, expert of that peer) per block, (ep - 1) x E/ep int64 each way,
-- the combine's counts being the dispatch's reversed.
-- Rank 0 prints two markdown tables; bench/README.md says how to read them.
local bench_options = dofile(arg[0]:match("(.*/)") .. "bench_options.lua")
local o = bench_options.parse("expert_exchange.lua", { rows = 2, seq = 128 })

local config = { model_type = "mixtral", vocab_size = 4096, hidden_size = 256, intermediate_size = 512,
                 num_hidden_layers = 4, num_attention_heads = 8, num_key_value_heads = 4,
                 num_local_experts = 8, num_experts_per_tok = 2, max_position_embeddings = 512 }
local world = accel.PartialState().num_processes
local layouts = world == 2 and {
  { name = "EP 2", dp_shard = 2, ep = 2 },
  { name = "EP 2, bf16", dp_shard = 2, ep = 2, mixed_precision = "bf16" },
} or world == 4 and {
  { name = "EP 4", dp_shard = 4, ep = 4 },
  { name = "EP 2 x FSDP 2", dp_shard = 4, ep = 2 },
  { name = "EP 2 x TP 2", dp_shard = 2, tp = 2, ep = 2 },
} or error(string.format("expert_exchange.lua: runs on 2 or 4 ranks (--nproc 2 or 4), not %d", world), 0)

local function bytes(t) return t and t:numel() * t:element_size() or 0 end

-- block's ep dim with its group wrapped: each all_to_all(x, counts) call is
-- added to `calls` with its inputs' counts and its output.
local function recording_ep(ep, calls)
  local real = ep.group
  local group = setmetatable({
    all_to_all = function(_, x, counts)
      local out, received = real:all_to_all(x, counts)
      if out.requires_grad then out:retain_grad() end
      calls[#calls + 1] = { x = x, out = out, sent = counts:sum(2), got = received:sum(2), counts = counts:numel() }
      return out, received
    end,
  }, { __index = function(_, k) return function(_, ...) return real[k](real, ...) end end })
  return setmetatable({ group = group }, { __index = ep })
end

-- The rows off this rank (not `me`, 0-based) of per-rank row counts
-- (int64 [ep, 1]) times a row's bytes.
local function off_rank(per_rank, me, row_bytes)
  return (per_rank:sum() - per_rank[me + 1]:sum()):item() * row_bytes
end

-- Bytes of rows sent and received off-rank, and of counts received
-- (int64; as many sent), over the calls.
local function measured(calls, me, ep)
  local sent, received, counts = 0, 0, 0
  for _, c in ipairs(calls) do
    counts = counts + (ep - 1) * c.counts * 8
    local row = c.x:numel() / math.max(c.x:size(1), 1)
    sent = sent + off_rank(c.sent, me, row * c.x:element_size())
    received = received + off_rank(c.got, me, row * c.out:element_size())
    local g = c.out.grad
    if g then  -- the backward sends the output's gradient back as it came
      sent = sent + off_rank(c.got, me, row * g:element_size())
      received = received + off_rank(c.sent, me, row * g:element_size())
    end
  end
  return sent, received, counts
end

-- The experts' share of what this rank holds after the step: their
-- parameters, gradients and AdamW state (found among the optimizer's
-- parameters by identity); FSDP-sharded (`sharding`, the prepared model's
-- expert_sharding, or nil), their flat shards, the experts' own tensors
-- being empty between steps.
local function expert_memory(model, opt, sharding)
  local held, experts = { params = 0, grads = 0, optim = 0 }, {}
  local tensors = sharding and sharding:shards() or {}
  if not sharding then
    for _, layer in ipairs(model.model.layers) do
      for _, p in ipairs(layer.block_sparse_moe.experts:parameters()) do tensors[#tensors + 1] = p end
    end
  end
  for _, p in ipairs(tensors) do
    held.params, held.grads = held.params + bytes(p), held.grads + bytes(p.grad)
    experts[#experts + 1] = p
  end
  local function is_expert(p)
    for _, e in ipairs(experts) do
      if p:is_set_to(e) then return true end
    end
    return false
  end
  local index, state = 0, opt.optimizer:state_dict()
  for g = 1, opt.optimizer:num_param_groups() do
    for _, p in ipairs(opt.optimizer:params(g)) do
      if is_expert(p) then
        for _, slot in ipairs({ "exp_avg", "exp_avg_sq" }) do
          local t = state[string.format("state.%d.%s", index, slot)]
          if not t or t:numel() ~= p:numel() then
            error(string.format("expert_exchange.lua: no AdamW %s of %d values at state.%d", slot, p:numel(), index), 0)
          end
          held.optim = held.optim + bytes(t)
        end
      end
      index = index + 1
    end
  end
  return held
end

local function run(l)
  local acc = accel.Accelerator{ mixed_precision = l.mixed_precision,
    parallelism_config = accel.ParallelismConfig{ dp_shard_size = l.dp_shard, tp_size = l.tp, ep_size = l.ep } }
  local mesh = acc.mesh
  local me, E, H = mesh.ep.rank, config.num_local_experts, config.hidden_size
  local per_rank = E / l.ep
  accel.set_seed(0)
  local model = accel.models.from_config(config):train()
  if l.tp then model = accel.parallel.tensor_parallel(model, mesh) end
  model = accel.parallel.expert_parallel(model, mesh)
  local calls, to_rank, row_bytes = {}, accel.zeros({ l.ep }, { dtype = accel.int64 }), nil
  for _, layer in ipairs(model.model.layers) do
    local block = layer.block_sparse_moe
    local route = block.route
    rawset(block, "ep", recording_ep(block.ep, calls))
    rawset(block, "route", function(self, h)
      local x, top, chosen = route(self, h)
      -- Experts are 1-based; ep rank r holds r * E/ep + 1 to (r + 1) * E/ep.
      -- one_hot's classes are 1-based too.
      local owner = (chosen:reshape(-1) - 1):div(per_rank, { rounding_mode = "floor" }) + 1
      to_rank:add_(accel.nn.functional.one_hot(owner, l.ep):sum(1))
      -- Rows travel in autocast's dtype under it (expert_parallel.lua).
      local travel = require("accel.core").amp.autocast_dtype(x.device)
      row_bytes = H * (travel and accel.zeros({ 1 }, { dtype = travel }) or x):element_size()
      return x, top, chosen
    end)
  end
  local opt
  model, opt = acc:prepare(model, accel.optim.AdamW(model:parameters(), { lr = 1e-4 }))
  -- Random tokens, the same on the ranks of one dp rank (its tp group).
  accel.set_seed(1 + mesh.dp.rank)
  local ids = accel.randint(0, config.vocab_size, { o.rows, o.seq })
  acc:backward(model{ input_ids = ids, labels = ids }.loss)
  opt:step()
  local held = expert_memory(model, opt, acc._models[1].expert_sharding)
  opt:zero_grad()
  local sent, received, counts = measured(calls, me, l.ep)
  -- What the other ranks of this ep group route to this rank's experts.
  local everyone = acc:gather_object({ to_rank = to_rank })
  local S = (to_rank:sum() - to_rank[me + 1]):item()
  local R = 0
  for k, rank in ipairs(mesh.ep.ranks) do
    if k - 1 ~= me then R = R + everyone[rank + 1].to_rank[me + 1]:item() end
  end
  local blocks = config.num_hidden_layers
  -- FSDP shards the experts over the dp_shard x cp ranks sharing an ep place.
  local replicas = mesh.dp_shard_cp.size / l.ep
  local whole_experts = blocks * E * 3 * H * config.intermediate_size * 4 / (l.ep * (l.tp or 1) * replicas)
  local result = {
    rank = acc.process_index, S = S, R = R, sent = sent, received = received,
    promised = 2 * (S + R) * row_bytes, row_bytes = row_bytes,
    exchanges = #calls, counts = counts, promised_counts = blocks * (l.ep - 1) * per_rank * 8,
    params = held.params / whole_experts, grads = held.grads / whole_experts, optim = held.optim / (2 * whole_experts),
    expert_mib = held.params / 2 ^ 20,
  }
  local all = acc:gather_object(result)
  acc:free_memory()
  collectgarbage()
  return all
end

local results = {}
for _, l in ipairs(layouts) do
  results[#results + 1] = { layout = l, ranks = run(l) }
  if accel.PartialState().is_main_process then io.stderr:write("done: ", l.name, "\n") end
end
if accel.PartialState().is_main_process then
  local kib = function(b) return b / 1024 end
  print(string.format("model: Mixtral, %d layers, hidden %d, intermediate %d, %d experts (top %d), vocab %d; "
                      .. "batch %d x %d per dp rank; one step (forward, backward, AdamW)", config.num_hidden_layers,
                      config.hidden_size, config.intermediate_size, config.num_local_experts,
                      config.num_experts_per_tok, config.vocab_size, o.rows, o.seq))
  print("")
  print("| layout | rank | rows off-rank S / R | row bytes | KiB sent | KiB received | promised 2(S+R) rows | "
        .. "sent/promised | received/promised | exchanges | count bytes in | promised | ratio |")
  print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
  for _, r in ipairs(results) do
    for _, x in ipairs(r.ranks) do
      print(string.format("| %s | %d | %d / %d | %d | %.1f | %.1f | %.1f | %.3f | %.3f | %d | %d | %d | %.1f |",
                          r.layout.name, x.rank, x.S, x.R, x.row_bytes, kib(x.sent), kib(x.received),
                          kib(x.promised), x.sent / x.promised, x.received / x.promised, x.exchanges, x.counts,
                          x.promised_counts, x.counts / x.promised_counts))
    end
  end
  print("")
  print("| layout | expert params MiB/rank | actual/promised 1/(ep x tp x R): params (min-max over ranks) | grads | "
        .. "AdamW state |")
  print("|---|---|---|---|---|")
  for _, r in ipairs(results) do
    local function span(k)
      local low, high = math.huge, -math.huge
      for _, x in ipairs(r.ranks) do low, high = math.min(low, x[k]), math.max(high, x[k]) end
      return string.format("%.3f-%.3f", low, high)
    end
    print(string.format("| %s | %.2f | %s | %s | %s |", r.layout.name, r.ranks[1].expert_mib, span("params"),
                        span("grads"), span("optim")))
  end
end
