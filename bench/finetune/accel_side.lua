-- accel's side of bench/finetune (run.py starts it, on one process or more):
--   accel-run bench/finetune/accel_side.lua --threads T [--nproc N] -- SPEC.json OUT_PREFIX
-- SPEC.json (written by run.py) names the checkpoint, the data, the mode
-- ("full"; "lora", whose initial adapter transformers_side.py saved;
-- "lora-bf16", the same adapter on a bfloat16 base; "qlora", on a 4-bit
-- base: nf4, double quantization, bfloat16 compute, then
-- prepare_model_for_kbit_training), the chunked loss or not, checkpointing,
-- AdamW's settings and the warm-up and timed steps. The same
-- loop as transformers_side.py: from_pretrained, (gradient checkpointing),
-- (LoRA), AdamW over the trainable parameters, prepare, then per step a
-- forward with labels the inputs, backward, step, zero_grad. Each rank
-- writes OUT_PREFIX.<rank>.json.
local json = require("accel.core").json
local spec_path, out_prefix = arg[1], arg[2]
if not (spec_path and out_prefix) then
  error("usage: accel-run bench/finetune/accel_side.lua -- SPEC.json OUT_PREFIX")
end
local spec = json.read(spec_path, 1024 * 1024)

local status = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "proc_status.lua")

local function reset_peak_rss()
  local f = assert(io.open("/proc/self/clear_refs", "w"))
  f:write("5")
  f:close()
end

local function allocated() return accel.cpu_memory_stats().allocated_bytes end

local rss_start = status("VmRSS")
local acc = accel.Accelerator{}
local rank, world = acc.process_index, acc.num_processes
local batches = json.read(spec.data, 1024 * 1024 * 1024).batches

local model
if spec.mode == "qlora" then
  model = accel.models.from_pretrained(spec.checkpoint, { dtype = "bfloat16", quantization_config =
    accel.BitsAndBytesConfig{ load_in_4bit = true, bnb_4bit_quant_type = "nf4", bnb_4bit_use_double_quant = true,
                              bnb_4bit_compute_dtype = accel.bfloat16 } })
  model = accel.peft.prepare_model_for_kbit_training(model, { use_gradient_checkpointing = spec.checkpointing })
else
  model = accel.models.from_pretrained(spec.checkpoint, { dtype = spec.mode == "lora-bf16" and "bfloat16" or "float32" })
  if spec.checkpointing then model:gradient_checkpointing_enable() end
end
if spec.mode ~= "full" then model = accel.peft.from_pretrained(model, spec.adapter, { is_trainable = true }) end
model:train()
local trainable = model:parameters()
local a = spec.adamw
local opt = accel.optim.AdamW(trainable, { lr = a.lr, betas = a.betas, eps = a.eps, weight_decay = a.weight_decay })
model, opt = acc:prepare(model, opt)

local rss_prepared, peak_setup = status("VmRSS"), status("VmHWM")
collectgarbage("collect")
local allocated_prepared, allocator_peak_setup = allocated(), accel.cpu_memory_stats().peak_allocated_bytes
reset_peak_rss()
accel.reset_peak_cpu_memory_stats()
-- chunked = false: the logits and their loss, as transformers computes them
-- (nil: the chunked loss, accel's default in training).
local skip_logits
if spec.chunked == false then skip_logits = false end
-- One step on the step-th batch: its seconds and its loss.
local function train_step(step)
  local ids = accel.LongTensor(batches[(step - 1) * world + rank + 1])
  local start = accel.time()
  local loss = model{ input_ids = ids, labels = ids, skip_logits = skip_logits }.loss
  acc:backward(loss)
  opt:step()
  opt:zero_grad()
  return accel.time() - start, loss:item()
end
local losses, times = {}, {}
for step = 1, spec.warmup + spec.steps do
  local elapsed, loss = train_step(step)
  losses[#losses + 1] = loss
  if step > spec.warmup then times[#times + 1] = elapsed end
end
local peak_training = status("VmHWM")
-- run.py --profile: one more step under LibTorch's profiler, its trace kept.
local trace, profiled_step_s
if spec.profile then
  trace = acc:profile(function() profiled_step_s = train_step(spec.warmup + spec.steps) end,
                      { output = spec.profile })[1]
end

local trainable_count = 0
for _, p in ipairs(trainable) do trainable_count = trainable_count + p:numel() end
local result = {
  side = "accel", rank = rank, world = world, threads = accel.get_num_threads(),
  trainable = trainable_count, losses = losses, step_s = times,
  rss_start = rss_start, rss_prepared = rss_prepared,
  peak_rss_setup = peak_setup, peak_rss_training = peak_training,
  allocated_prepared = allocated_prepared, allocator_peak_setup = allocator_peak_setup,
  allocator_peak_training = accel.cpu_memory_stats().peak_allocated_bytes, trace = trace, profiled_step_s = profiled_step_s,
}
if world == 1 and spec.kept_after_forward then
  -- What a forward leaves allocated once Lua's garbage is collected: what
  -- autograd keeps for backward, and the loss (bench/finetune/memory.lua).
  local ids = accel.LongTensor(batches[1])
  collectgarbage("collect")
  local before = allocated()
  local loss = model{ input_ids = ids, labels = ids, skip_logits = skip_logits }.loss
  collectgarbage("collect")
  result.kept_after_forward = allocated() - before
  loss = nil
  collectgarbage("collect")
end
local f = assert(io.open(string.format("%s.%d.json", out_prefix, rank), "w"))
f:write(json.encode(result))
f:close()
