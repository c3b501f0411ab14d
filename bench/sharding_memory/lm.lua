-- The sharding benchmark's accel side: a transformer language model trained
-- for a few steps in one of the data-parallel modes, reporting its memory
-- and speed. bench/sharding_memory/harness.py runs it; lm.py is its PyTorch
-- twin (same blocks, sizes, data and measurements).
--   accel-run bench/sharding_memory/lm.lua --nproc 2 --threads 1 -- MODE \
--     [layers=12 width=768 heads=12 vocab=8192 seq=64 batch=2 warmup=1 steps=3]
-- MODE: ddp (plain data parallel), zero1, zero2, zero3 (Accelerator{zero_stage}),
-- fsdp (FullyShardedDataParallelPlugin FULL_SHARD wrapping Block); zero3_empty and
-- fsdp_empty are zero3 and fsdp with the model built whole on the main process
-- only, under accel.init_empty_weights on the others (zero3_empty says so in
-- the recipe, fsdp_empty through cpu_ram_efficient_loading and acc:build_model).
-- Each rank prints one line `SHARDING {...}` (keys: harness.py's docstring).
local optim, F = accel.optim, accel.nn.functional
local wrap_policy = require("accel.parallel.fsdp.wrap_policy")
local status_kib = dofile(arg[0]:match("^(.*/)") .. "../workloads/bench.lua").status_kib

local function fsdp(empty)
  return { fsdp_plugin = accel.FullyShardedDataParallelPlugin{ sharding_strategy = "FULL_SHARD",
                                                                transformer_layer_cls = "Block",
                                                                cpu_ram_efficient_loading = empty } }
end
local modes = {
  ddp = function() return {} end,
  zero1 = function() return { zero_stage = 1 } end,
  zero2 = function() return { zero_stage = 2 } end,
  zero3 = function() return { zero_stage = 3 } end,
  zero3_empty = function() return { zero_stage = 3 } end,
  fsdp = function() return fsdp(false) end,
  fsdp_empty = function() return fsdp(true) end,
}
local mode = arg[1]
if not modes[mode] then error("usage: lm.lua MODE [key=value ...]; MODE is ddp, zero1, zero2, zero3, zero3_empty, fsdp or fsdp_empty", 0) end
local o = { layers = 12, width = 768, heads = 12, vocab = 8192, seq = 64, batch = 2, warmup = 1, steps = 3 }
for i = 2, #arg do
  local key, value = arg[i]:match("^(%w+)=(%d+)$")
  if not (key and o[key]) then error("lm.lua: expected key=number with a key of the defaults, got " .. arg[i], 0) end
  o[key] = tonumber(value)
end

-- Starts VmHWM again from the current RSS (Linux's clear_refs, value 5), so
-- that the training peak is told apart from building and sharding the model.
local function reset_peak_rss()
  accel.reset_peak_cpu_memory_stats()
  local f = assert(io.open("/proc/self/clear_refs", "w"))
  f:write("5")
  f:close()
end

local ShardedLM = dofile(arg[0]:match("^(.*/)") .. "../../recipes/sharded_lm_model.lua")

local function bytes(t)
  return t and t:numel() * t:element_size() or 0
end

-- Parameters, gradients and optimizer state this rank holds. Sharded, the
-- optimizer steps shards: at stages 1 and 2 they are views of the full
-- parameters (counted with the model's), at stage 3 storage of their own;
-- their .grad is this rank's gradient slice.
local function model_state_bytes(acc, model, opt)
  local out = { param_bytes = 0, grad_bytes = 0, optim_bytes = 0 }
  for _, p in ipairs(model:parameters()) do
    out.param_bytes = out.param_bytes + bytes(p)
    out.grad_bytes = out.grad_bytes + bytes(p.grad)
  end
  if acc.sharding then
    for g = 1, opt.optimizer:num_param_groups() do
      for _, shard in ipairs(opt.optimizer:params(g)) do
        if acc.sharding.stage == 3 then out.param_bytes = out.param_bytes + bytes(shard) end
        out.grad_bytes = out.grad_bytes + bytes(shard.grad)
      end
    end
  end
  -- The engine optimizer's own state: at stages 1 to 3 only its shards'.
  for key, t in pairs(opt.optimizer:state_dict()) do
    if key:sub(1, 6) == "state." then out.optim_bytes = out.optim_bytes + bytes(t) end
  end
  return out
end

-- The parameters of the largest unit stage 3 gathers at once (the root, or
-- a wrapped module), for the working set the promise allows on top.
local function largest_unit(acc, model)
  if not (acc.sharding and acc.sharding.stage == 3) then return 0 end
  local largest = 0
  for _, unit in ipairs(wrap_policy.units(model, acc.sharding.policy)) do
    local n = 0
    for _, p in ipairs(unit.params) do n = n + p:numel() end
    largest = math.max(largest, n)
  end
  return largest
end

local acc = accel.Accelerator(modes[mode]())
local rss_base = status_kib("VmRSS")
-- Tensor memory as the allocator counts it (blocks over 1 KiB), which the
-- pools and the rest of the process do not add to.
local live_base = accel.cpu_memory_stats().allocated_bytes
accel.set_seed(0)
local function build() return ShardedLM(o) end
local model
if mode == "zero3_empty" and not acc.is_main_process then
  model = accel.init_empty_weights(build)
else
  model = acc:build_model(build)  -- empty off the main process under fsdp_empty
end
local numel = model:num_parameters()
local unit_numel = largest_unit(acc, model)
local opt = optim.AdamW(model:parameters(), { lr = 1e-4 })
model, opt = acc:prepare(model, opt)
local init_peak = status_kib("VmHWM")
reset_peak_rss()

-- Random tokens, each rank its own: the figures are memory and time, not what is learnt.
accel.set_seed(1, { device_specific = true })
local ids = accel.randint(1, o.vocab + 1, { 4, o.batch, o.seq + 1 })
local start, state, loss
for step = 1, o.warmup + o.steps do
  if step == o.warmup + 1 then start = accel.time() end
  local batch = ids[(step - 1) % 4 + 1]
  local logits = model(batch:narrow(2, 1, o.seq))
  loss = F.cross_entropy(logits:reshape(-1, o.vocab), batch:narrow(2, 2, o.seq):reshape(-1))
  acc:backward(loss)
  opt:step()
  -- What the rank holds after its last step, before the gradients are cleared.
  if step == o.warmup + o.steps then state = model_state_bytes(acc, model, opt) end
  opt:zero_grad()
  loss = loss:item()
end
local seconds = accel.time() - start
print(string.format('SHARDING {"rank": %d, "world": %d, "mode": "%s", "numel": %d, "unit_numel": %d, '
                    .. '"samples_per_s": %.6g, "loss": %.6g, "rss_base_kib": %d, "init_peak_kib": %d, '
                    .. '"train_peak_kib": %d, "param_bytes": %d, "grad_bytes": %d, "optim_bytes": %d, '
                    .. '"live_base_bytes": %d, "live_peak_bytes": %d}',
                    acc.process_index, acc.num_processes, mode, numel, unit_numel,
                    o.batch * acc.num_processes * o.steps / seconds, loss, rss_base, init_peak,
                    status_kib("VmHWM"), state.param_bytes, state.grad_bytes, state.optim_bytes, live_base,
                    accel.cpu_memory_stats().peak_allocated_bytes))
