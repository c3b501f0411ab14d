-- Activation memory and step time of a 12-layer Llama-architecture model
-- (accel.models.from_config, fresh weights) with and without
-- model:gradient_checkpointing_enable(), on one process, CPU.
--   build/accel-run bench/finetune/memory.lua --threads 2 [-- steps [hidden [seq]]]
-- For each setting, after a warm-up step whose gradients stay allocated
-- (zeroed in place), each timed step is measured from a collected Lua heap:
--   kept after forward  bytes the forward leaves allocated once Lua's
--                       garbage is collected: what autograd saved
--   step peak           the CPU allocator's peak over forward and backward,
--                       above what was allocated before (weights, gradients,
--                       the batch): the activations, recomputed ones, the
--                       gradients of activations and the garbage Lua had not
--                       collected yet
-- accel.cpu_memory_stats counts blocks over 1 KiB (engine/caching_cpu_allocator.h).
local core = require("accel.core")

local steps = tonumber(arg[1]) or 3
local hidden = tonumber(arg[2]) or 256
local seq = tonumber(arg[3]) or 256
local batch, layers = 4, 12
local config = {
  model_type = "llama", vocab_size = 512, hidden_size = hidden, intermediate_size = math.floor(hidden * 8 / 3),
  num_hidden_layers = layers, num_attention_heads = 8, num_key_value_heads = 8, max_position_embeddings = seq,
}

local MiB = 2 ^ 20
local function allocated() return accel.cpu_memory_stats().allocated_bytes end

local function measure(checkpointed)
  accel.set_seed(0)
  local model = accel.models.from_config(config)
  if checkpointed then model:gradient_checkpointing_enable() end
  local ids = accel.randint(0, config.vocab_size, { batch, seq })
  local function loss() return model{ input_ids = ids, labels = ids }.loss end
  loss():backward()  -- the warm-up: gradients allocated from here on
  local kept, peaks, times = {}, {}, {}
  for _ = 1, steps do
    for _, p in ipairs(model:parameters()) do p.grad:zero_() end
    collectgarbage("collect")
    local before = allocated()
    accel.reset_peak_cpu_memory_stats()
    local start = accel.time()
    local l = loss()
    local peak_forward = accel.cpu_memory_stats().peak_allocated_bytes
    l:backward()
    times[#times + 1] = accel.time() - start
    peaks[#peaks + 1] = math.max(peak_forward, accel.cpu_memory_stats().peak_allocated_bytes) - before
    l = nil
    -- What a forward keeps, alone: another forward, collected, then freed.
    collectgarbage("collect")
    local before_forward = allocated()
    local again = loss()
    collectgarbage("collect")
    kept[#kept + 1] = allocated() - before_forward
    again = nil
    collectgarbage("collect")
  end
  local function median(t)
    table.sort(t)
    return t[math.ceil(#t / 2)]
  end
  local params = 0
  for _, p in ipairs(model:parameters()) do params = params + p:numel() end
  return { kept = median(kept), peak = median(peaks), time = median(times), params = params }
end

local off = measure(false)
local on = measure(true)
local tokens = batch * seq
print(string.format("Llama, %d layers, hidden %d, %d parameters; batch %d x %d tokens; %d timed steps, medians",
                    layers, hidden, off.params, batch, seq, steps))
print("")
print("| gradient checkpointing | kept after forward MiB | step peak MiB | step s | tokens/s |")
print("|---|---|---|---|---|")
for _, row in ipairs({ { "off", off }, { "on", on } }) do
  local r = row[2]
  print(string.format("| %s | %.1f | %.1f | %.2f | %.0f |", row[1], r.kept / MiB, r.peak / MiB, r.time,
                      tokens / r.time))
end
print("")
print(string.format("with/without: kept after forward %.3f, step peak %.3f, step time %.2f",
                    on.kept / off.kept, on.peak / off.peak, on.time / off.time))
print(string.format("recomputations: %d", core.autograd.recomputations().total))
