-- Fine-tunes a pretrained causal language model (a Hugging Face folder:
-- Llama, Mistral, Qwen2, Mixtral, GPT-2) on a text or JSON Lines file, with
-- LoRA adapters or every weight, on any number of processes:
--   accel-run recipes/finetune.lua --nproc 2 -- MODEL_DIR DATA [--option value ...]
-- DATA: a .jsonl/.json file holds one JSON object a line whose "text" is one
-- example (--text_key names another key), or, with --completion_key, a
-- prompt (--prompt_key) and its completion, the loss then on the completion
-- alone; with --chat, a conversation under "messages" (--messages_key) that
-- the tokenizer's chat template renders (--assistant_only_loss: the loss on
-- the assistant's turns alone); any other file holds one example a line.
-- Each example is a row cut to --max_length and padded (the loss skips the
-- padding); --packing instead puts several in a row of --max_length, each
-- attending only to itself (--packing_strategy bfd or wrapped).
-- It writes under --output_dir: checkpoints/checkpoint_<n> every
-- --save_steps updates (acc:save_state; --resume continues the newest),
-- logs/ (the trackers' files: `accel-run plot OUTPUT_DIR/logs`), and at the
-- end model/: the adapter in PEFT's format (or, with --full, the whole model
-- as transformers saves it) with the tokenizer. Then the main process
-- prints a sample generated from --sample_prompt. docs/api/finetuning.md
-- lists every option.
local args = require("accel.args")
local usage = "usage: accel-run recipes/finetune.lua --nproc N -- MODEL_DIR DATA [--option value ...]"

-- Options and their defaults. A boolean option is given as `--name` (or
-- `--name=false`), the others as `--name value` or `--name=value`.
-- lr = 0: 2e-4 with LoRA, 2e-5 with --full; warmup_steps = -1: 3% of the
-- updates; max_steps = 0: as many as --epochs make; target_modules "": PEFT's
-- default for the architecture.
local o = {
  lora = true, r = 8, lora_alpha = 16, lora_dropout = 0.05, target_modules = "", load_in_4bit = false,
  bnb_4bit_quant_type = "nf4",
  lr = 0, weight_decay = 0, warmup_steps = -1, max_grad_norm = 1,
  epochs = 1, max_steps = 0, batch_size = 4, grad_accum = 1, max_length = 512, packing = false, text_key = "text",
  prompt_key = "prompt", completion_key = "", chat = false, messages_key = "messages", assistant_only_loss = false,
  packing_strategy = "bfd", truncation_mode = "keep_start",
  bf16 = false, gradient_checkpointing = false, seed = 42,
  output_dir = "runs/finetune", log_every = 10, save_steps = 0, save_total_limit = 2, resume = false,
  tracker = "jsonl", sample_prompt = "", sample_tokens = 32,
}
local positional = {}
local i = 1
while i <= #arg do
  local name, value = arg[i]:match("^%-%-([%w_]+)=(.*)$")
  name = name or arg[i]:match("^%-%-([%w_]+)$")
  if not name then
    positional[#positional + 1] = arg[i]
  elseif name == "full" and value == nil then
    o.lora = false  -- --full is --lora=false
  elseif o[name] == nil then
    local known = {}
    for k in pairs(o) do known[#known + 1] = k end
    known[#known + 1] = "full"
    table.sort(known)
    args.error(string.format("finetune.lua: unknown option '%s' (known: %s)", arg[i], table.concat(known, " ")))
  elseif type(o[name]) == "boolean" then
    if value ~= nil and value ~= "true" and value ~= "false" then
      args.error(string.format("finetune.lua: --%s takes no value or =true/=false, got '%s'", name, value))
    end
    o[name] = value ~= "false"
  else
    if value == nil then
      i = i + 1
      value = arg[i]
      if value == nil then args.error(string.format("finetune.lua: --%s needs a value", name)) end
    end
    if type(o[name]) == "number" then
      value = tonumber(value) or args.error(string.format("finetune.lua: --%s must be a number, got '%s'", name, value))
    end
    o[name] = value
  end
  i = i + 1
end
if #positional ~= 2 then args.error(usage) end
local model_dir, data_file = positional[1], positional[2]
for _, name in ipairs({ "r", "epochs", "batch_size", "grad_accum", "max_length", "log_every", "save_total_limit",
                        "sample_tokens" }) do
  args.positive_integer("finetune.lua", "--" .. name, o[name])
end
if o.lr == 0 then o.lr = o.lora and 2e-4 or 2e-5 end  -- adapters start at zero and take a larger step

-- Checkpoints are named automatically (checkpoint_0, 1, ...) and only the
-- newest --save_total_limit are kept. Without --bf16, accel-run's
-- --mixed-precision (or its config file) decides.
local acc = accel.Accelerator{
  mixed_precision = o.bf16 and "bf16" or nil,
  gradient_accumulation_steps = o.grad_accum,
  log_with = o.tracker ~= "none" and o.tracker or nil,
  project_dir = o.output_dir,
  project_config = accel.ProjectConfiguration{ automatic_checkpoint_naming = true, total_limit = o.save_total_limit },
}
accel.set_seed(o.seed)
-- Workers restarted after a failure (accel-run --max-restarts) resume too.
local restarted = (os.getenv("ACCEL_RESTART_COUNT") or "0") ~= "0"
if not o.resume and not restarted then
  for _, name in ipairs(require("accel.core").formats.list_folder(o.output_dir .. "/checkpoints")) do
    if name:match("^checkpoint_%d+$") then
      args.error(string.format("finetune.lua: '%s' holds checkpoints of an earlier run: pass --resume to continue "
                               .. "it, or choose another --output_dir", o.output_dir))
    end
  end
end

-- The model: LoRA freezes it and trains adapters beside its target layers.
-- --load_in_4bit: QLoRA, the frozen base in 4 bits (NormalFloat, double
-- quantization, bf16 compute with --bf16), prepared as PEFT's
-- prepare_model_for_kbit_training does.
if o.load_in_4bit and not o.lora then args.error("finetune.lua: --load_in_4bit trains adapters; drop --full") end
local model = accel.models.from_pretrained(model_dir, o.load_in_4bit and { quantization_config =
  accel.BitsAndBytesConfig{ load_in_4bit = true, bnb_4bit_quant_type = o.bnb_4bit_quant_type,
                            bnb_4bit_use_double_quant = true,
                            bnb_4bit_compute_dtype = o.bf16 and "bfloat16" or "float32" } } or nil):train()
if o.load_in_4bit then
  model = accel.peft.prepare_model_for_kbit_training(model, { use_gradient_checkpointing = o.gradient_checkpointing })
end
if o.lora then
  local config = { r = o.r, lora_alpha = o.lora_alpha, lora_dropout = o.lora_dropout, task_type = "CAUSAL_LM" }
  if o.target_modules == "all-linear" then
    config.target_modules = "all-linear"
  elseif o.target_modules ~= "" then  -- a comma-separated list; none: PEFT's default for the architecture
    config.target_modules = {}
    for name in o.target_modules:gmatch("[^,%s]+") do config.target_modules[#config.target_modules + 1] = name end
  end
  model = accel.peft.get_peft_model(model, accel.peft.LoraConfig(config))
end
if o.gradient_checkpointing and not o.load_in_4bit then model:gradient_checkpointing_enable() end

-- The data, tokenized once by every process; the loader gives each its share.
local tok = accel.tokenizers.from_pretrained(model_dir)
if tok.pad_token_id == nil then tok.pad_token_id = tok.eos_token_id end  -- the mask and labels hide it
local dataset = accel.tokenizers.TokenizedDataset(data_file, tok, {
  max_length = o.max_length, packing = o.packing, text_key = o.text_key, prompt_key = o.prompt_key,
  completion_key = o.completion_key ~= "" and o.completion_key or nil,
  messages_key = o.chat and o.messages_key or nil, assistant_only_loss = o.assistant_only_loss,
  packing_strategy = o.packing_strategy, truncation_mode = o.truncation_mode,
})
local loader = accel.data.DataLoader(dataset, { batch_size = o.batch_size, shuffle = true })
loader = acc:prepare(loader)
local updates_per_epoch = math.ceil(loader:num_batches() / o.grad_accum)
local total = o.max_steps > 0 and o.max_steps or o.epochs * updates_per_epoch

local opt = accel.optim.AdamW(model:parameters(), { lr = o.lr, weight_decay = o.weight_decay })
local warmup = o.warmup_steps >= 0 and o.warmup_steps or math.floor(0.03 * total)
local sched = accel.optim.lr_scheduler.cosine(opt, { total = total, warmup = math.min(warmup, total) })
local trainable, all = 0, 0
if o.lora then
  trainable, all = model:get_nb_trainable_parameters()
else
  for _, p in ipairs(model:parameters()) do trainable = trainable + p:numel() end
  all = trainable
end
acc:print(string.format("%s fine-tuning: %d of %d weights train; %d examples%s, %d updates (%d an epoch) of %d x %d x %d rows",
                        o.load_in_4bit and "QLoRA" or o.lora and "LoRA" or "full", trainable, all, dataset.examples,
                        o.packing and string.format(" in %d packed rows", dataset:__len()) or "", total,
                        updates_per_epoch, o.batch_size, o.grad_accum, acc.num_processes))
model, opt, sched = acc:prepare(model, opt, sched)
acc:init_trackers("logs", o)
if o.resume then
  acc:print("resumed from " .. acc:load_state())
elseif restarted then  -- from the newest checkpoint, or afresh if the failure came before the first
  local ok, loaded = pcall(acc.load_state, acc)
  if not ok and not tostring(loaded):find("no complete checkpoint", 1, true) then error(loaded, 0) end
  acc:print(ok and ("resumed from " .. loaded) or "no checkpoint yet: starting afresh")
end

-- One update is grad_accum micro-batches; the loss reported for it is their
-- mean over every process.
local micro_losses, window, started = {}, {}, os.time()
while opt.updates < total do
  -- Packed rows carry position_ids: each example attends to itself alone.
  for input_ids, attention_mask, labels, position_ids in loader:iter() do
    local before = opt.updates
    acc:accumulate(model, function()
      local loss = model{ input_ids = input_ids, attention_mask = attention_mask, labels = labels,
                          position_ids = position_ids }.loss
      acc:backward(loss)
      micro_losses[#micro_losses + 1] = loss:item()
      if acc.sync_gradients and o.max_grad_norm > 0 then acc:clip_grad_norm(model:parameters(), o.max_grad_norm) end
      opt:step()
      sched:step()
      opt:zero_grad()
    end)
    if opt.updates > before then
      local sum = 0
      for _, l in ipairs(micro_losses) do sum = sum + l end
      window[#window + 1], micro_losses = sum / #micro_losses, {}
      local step = opt.updates
      if step % o.log_every == 0 or step == total then
        sum = 0
        for _, l in ipairs(window) do sum = sum + l end
        local loss = acc:reduce(accel.tensor(sum / #window), "mean"):item()
        local lr = sched:get_last_lr()[1]
        acc:log({ loss = loss, lr = lr }, step)
        acc:print(string.format("step %d/%d  loss %.6f  lr %.3e  %ds", step, total, loss, lr, os.time() - started))
        window = {}
      end
      if o.save_steps > 0 and step % o.save_steps == 0 then acc:print("saved " .. acc:save_state()) end
      if step >= total then break end
    end
  end
end

-- The result: the adapter alone (PEFT's adapter_config.json and
-- adapter_model.safetensors), or the whole model, and the tokenizer beside it.
local out_dir = o.output_dir .. "/model"
local tuned = acc:unwrap_model(model)
tuned:save_pretrained(out_dir, { is_main_process = acc.is_main_process })
if acc.is_main_process then
  tok:save_pretrained(out_dir)
  print("saved " .. (o.lora and "the adapter" or "the model") .. " in " .. out_dir)

  -- A greedy sample from the tuned model: the prompt given, the first
  -- example's prompt, or the first tokens of the first example.
  local prompt
  if o.chat then  -- the template's rendering of a user turn, then its generation prompt
    local text = o.sample_prompt ~= "" and o.sample_prompt or "Hello"
    local ids = tok:apply_chat_template({ { role = "user", content = text } },
                                        { add_generation_prompt = true, tokenize = true }).input_ids
    prompt = accel.tensor(ids, { dtype = accel.int64 }):view(1, -1)
  elseif o.sample_prompt ~= "" then
    prompt = tok({ o.sample_prompt }).input_ids
  elseif o.completion_key ~= "" then
    local ids, mask, labels = dataset:get(1)
    local real, real_labels = ids:masked_select(mask:eq(1)), labels:masked_select(mask:eq(1)):totable()
    local n = 0  -- the prompt's tokens lead the row's tokens, labelled -100
    while n < #real_labels and real_labels[n + 1] == -100 do n = n + 1 end
    prompt = real:narrow(1, 1, math.max(n, 1)):view(1, -1)
  else
    local ids, mask = dataset:get(1)
    local real = ids:masked_select(mask:eq(1))
    prompt = real:narrow(1, 1, math.min(8, real:numel())):view(1, -1)
  end
  local out = accel.no_grad(function()
    return tuned:eval():generate(prompt:to(acc.device), { max_new_tokens = o.sample_tokens, do_sample = false,
                                                          pad_token_id = tok.pad_token_id })
  end)
  print("sample: " .. tok:decode(out[1], { skip_special_tokens = true }))
end
acc:end_training()
