-- One trial of a LoRA sweep over a base model, for a serve's warm workers
-- (docs/live-runs.md): the base loads once, in the serve's first trial;
-- every later trial is handed the weights already in memory.
--   accel-run serve --nproc 2 &
--   for r in 4 8 16; do accel-run submit recipes/lora_trial.lua -- MODEL_DIR $r; done
-- Trains adapters of rank R for STEPS (default 20) AdamW steps on random
-- token sequences of the seed's (a stand-in for a dataset), and prints the
-- last loss; the adapter goes to runs/lora_trial/r<R> (PEFT's format).
local model_dir, r, steps = arg[1], tonumber(arg[2] or "8"), tonumber(arg[3] or "20")
if not model_dir then error("usage: accel-run recipes/lora_trial.lua -- MODEL_DIR [R [STEPS]]") end
acc = accel.Accelerator{}
accel.set_seed(0)
local model = accel.models.from_pretrained(model_dir):train()
model = accel.peft.get_peft_model(model, accel.peft.LoraConfig{ r = r, lora_alpha = 2 * r, task_type = "CAUSAL_LM" })
local vocab = model.config.vocab_size
local ids = accel.randint(0, vocab, { 64, 16 })
local loader = accel.data.DataLoader(accel.data.TensorDataset(ids), { batch_size = 4, shuffle = true })
local opt = accel.optim.AdamW(model:parameters(), { lr = 1e-3 })
model, opt, loader = acc:prepare(model, opt, loader)
local loss
while opt.updates < steps do
  for batch in loader:iter() do
    loss = model({ input_ids = batch, labels = batch }).loss
    acc:backward(loss)
    opt:step()
    opt:zero_grad()
    if opt.updates == steps then break end
  end
end
acc:print(string.format("r %d: loss %.4f after %d steps", r, loss:item(), steps))
acc:wait_for_everyone()
if acc.is_main_process then acc:unwrap_model(model):save_pretrained("runs/lora_trial/r" .. r) end
