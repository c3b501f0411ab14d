-- A character-level language model: a 2-layer causal Transformer learns a
-- text file and then writes some of its own.
--   accel-run recipes/charlm.lua --nproc 2 [-- path/to/text.txt [PROJECT_DIR [RUN_NAME [LR [STEPS]]]]]
-- Default text: the GPL, version 3, which every Debian system ships. The
-- loss and learning rate go to PROJECT_DIR/RUN_NAME/ (default
-- runs/charlm/): metrics.jsonl and TensorBoard's files; `accel-run plot
-- runs/charlm` draws them. The trained model is saved with save_model in
-- PROJECT_DIR/RUN_NAME/model/, with charlm_config.lua, for recipes/generate.lua.
local nn, optim, data, F = accel.nn, accel.optim, accel.data, accel.nn.functional

local path = arg[1] or "/usr/share/common-licenses/GPL-3"
local seq_len, d_model, heads, layers = 64, 128, 4, 2
local batch_size, steps, log_every = 32, tonumber(arg[5]) or 400, 50
local config = { lr = tonumber(arg[4]) or 3e-3, weight_decay = 0.01, batch_size = batch_size, steps = steps,
                 seq_len = seq_len, d_model = d_model, heads = heads, layers = layers }

local project_dir, run_name = arg[2] or "runs", arg[3] or "charlm"
local acc = accel.Accelerator{ log_with = "all", project_dir = project_dir }
accel.set_seed(0)
acc:init_trackers(run_name, config)

-- Overlapping windows (a new one every 16 characters) give more distinct samples.
local text = data.TextDataset(path, { seq_len = seq_len, level = "char", stride = 16 })
local vocab = text.vocab
local loader = data.DataLoader(text, { batch_size = batch_size, shuffle = true, drop_last = true })
loader = acc:prepare(loader)

local CharLM = dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "charlm_model.lua")
config.vocab_size = vocab.vocab_size
config.text = path

local model = CharLM(config)
local opt = optim.AdamW(model:parameters(), { lr = config.lr, weight_decay = config.weight_decay })
local sched = optim.lr_scheduler.cosine(opt, { warmup = math.min(50, math.floor(steps / 2)), total = steps,
                                              min_lr = 1e-4 })
model, opt, sched = acc:prepare(model, opt, sched)
acc:print(string.format("%d characters, vocabulary of %d, %d parameters, %d steps", text.ids:numel(),
                        vocab.vocab_size, model:num_parameters(), steps))

local step, recent = 0, {}
local started = os.time()
local bar = accel.progress(steps, { desc = "steps" })
while step < steps do
  for x, y in loader:iter() do
    local logits = model(x)
    local loss = F.cross_entropy(logits:view(-1, vocab.vocab_size), y:view(-1))
    acc:backward(loss)
    acc:clip_grad_norm(model:parameters(), 1.0)
    opt:step()
    sched:step()
    opt:zero_grad()
    step = step + 1
    bar:update()
    acc:log({ loss = loss, lr = sched:get_last_lr()[1] }, step)
    recent[(step - 1) % log_every + 1] = loss:item()
    if step % log_every == 0 or step == steps then
      local sum = 0
      for _, v in ipairs(recent) do sum = sum + v end
      local mean = acc:reduce(accel.tensor(sum / #recent), "mean"):item()
      bar:set_postfix{ loss = mean }
      acc:print(string.format("step %4d  loss %.3f  lr %.2e  %ds", step, mean, sched:get_last_lr()[1],
                              os.time() - started))
      if step == steps then acc:print(string.format("final loss %.3f", mean)) end
      recent = {}
    end
    if step == steps then break end
  end
end
bar:close()

if acc.is_main_process then
  print("sample:")
  model:eval()
  print(CharLM.sample(model, vocab, "The ", { count = 300, temperature = 0.8, seq_len = seq_len, device = acc.device }))
end

-- The weights as save_model writes them, and what generate.lua needs to
-- rebuild the model and its vocabulary.
local model_dir = project_dir .. "/" .. run_name .. "/model"
acc:save_model(model, model_dir)
if acc.is_main_process then
  local f = assert(io.open(model_dir .. "/charlm_config.lua", "w"))
  f:write(string.format("return { text = %q, vocab_size = %d, seq_len = %d, d_model = %d, heads = %d, layers = %d }\n",
                        path, vocab.vocab_size, seq_len, d_model, heads, layers))
  f:close()
  print("model saved in " .. model_dir)
end
acc:end_training()
