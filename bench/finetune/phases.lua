-- Memory of bench/finetune/accel_side.lua's loop phase by phase, on one
-- process: VmRSS, VmHWM (reset after prepare, as accel_side.lua), RssAnon,
-- RssFile and accel.cpu_memory_stats after loading, prepare_model_for_kbit_training
-- (qlora), acc:prepare and each step's forward, backward and optimizer step
-- (RESULTS-1b.md, "QLoRA's peak, phase by phase"). LoRA r 16, alpha 32 on
-- q/k/v/o from get_peft_model; random tokens, 1 x 256; the chunked loss.
--   build/accel-run bench/finetune/phases.lua --threads 1 -- CHECKPOINT qlora|lora-bf16 [steps]
local ckpt, mode, steps = arg[1], arg[2], tonumber(arg[3] or 2)
if not (ckpt and (mode == "qlora" or mode == "lora-bf16")) then
  error("usage: accel-run bench/finetune/phases.lua -- CHECKPOINT qlora|lora-bf16 [steps], got mode " .. tostring(mode))
end
local MiB = 2^20
local status = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "proc_status.lua")
local function reset_peak_rss() local f = assert(io.open("/proc/self/clear_refs", "w")); f:write("5"); f:close() end
local function report(phase)
  local s = accel.cpu_memory_stats()
  io.stderr:write(string.format("%-12s RSS %6.0f HWM %6.0f anon %6.0f file %6.0f | alloc %6.0f peak %6.0f pooled %5.0f\n",
    phase, status("VmRSS")/MiB, status("VmHWM")/MiB, status("RssAnon")/MiB, status("RssFile")/MiB,
    s.allocated_bytes/MiB, s.peak_allocated_bytes/MiB, s.pooled_bytes/MiB))
end
report("start")
local acc = accel.Accelerator{}
local model
if mode == "qlora" then
  model = accel.models.from_pretrained(ckpt, { dtype = "bfloat16", quantization_config =
    accel.BitsAndBytesConfig{ load_in_4bit = true, bnb_4bit_quant_type = "nf4", bnb_4bit_use_double_quant = true,
                              bnb_4bit_compute_dtype = accel.bfloat16 } })
  collectgarbage("collect"); report("loaded")
  model = accel.peft.prepare_model_for_kbit_training(model, { use_gradient_checkpointing = false })
  collectgarbage("collect"); report("kbit-prep")
else
  model = accel.models.from_pretrained(ckpt, { dtype = "bfloat16" })
  collectgarbage("collect"); report("loaded")
end
model = accel.peft.get_peft_model(model, accel.peft.LoraConfig{ r = 16, lora_alpha = 32, lora_dropout = 0, target_modules = {"q_proj", "k_proj", "v_proj", "o_proj"} })
model:train()
local opt = accel.optim.AdamW(model:parameters(), { lr = 1e-4, weight_decay = 0.01 })
model, opt = acc:prepare(model, opt)
collectgarbage("collect"); report("prepared")
reset_peak_rss(); accel.reset_peak_cpu_memory_stats()
local ids = accel.randint(0, 128256, {1, 256})
for step = 1, steps do
  local t = accel.time()
  local out = model{ input_ids = ids, labels = ids }
  report("fwd" .. step)
  acc:backward(out.loss)
  report("bwd" .. step)
  opt:step(); opt:zero_grad()
  out = nil
  collectgarbage("collect")
  report("step" .. step)
  io.stderr:write(string.format("step %d %.1f s\n", step, accel.time() - t))
end
