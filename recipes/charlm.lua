-- A character-level language model: a 2-layer causal Transformer learns a
-- text file and then writes some of its own.
--   accel-run recipes/charlm.lua --nproc 2 [-- path/to/text.txt [PROJECT_DIR [RUN_NAME [LR]]]]
-- Default text: the GPL, version 3, which every Debian system ships. The
-- loss and learning rate go to PROJECT_DIR/RUN_NAME/ (default
-- runs/charlm/): metrics.jsonl and TensorBoard's files; `accel-run plot
-- runs/charlm` draws them.
local nn, optim, data, F = accel.nn, accel.optim, accel.data, accel.nn.functional

local path = arg[1] or "/usr/share/common-licenses/GPL-3"
local seq_len, d_model, heads, layers = 64, 128, 4, 2
local batch_size, steps, log_every = 32, 400, 50
local config = { lr = tonumber(arg[4]) or 3e-3, weight_decay = 0.01, batch_size = batch_size, steps = steps,
                 seq_len = seq_len, d_model = d_model, heads = heads, layers = layers }

local acc = accel.Accelerator{ log_with = "all", project_dir = arg[2] or "runs" }
accel.set_seed(0)
acc:init_trackers(arg[3] or "charlm", config)

-- Overlapping windows (a new one every 16 characters) give more distinct samples.
local text = data.TextDataset(path, { seq_len = seq_len, level = "char", stride = 16 })
local vocab = text.vocab
local loader = data.DataLoader(text, { batch_size = batch_size, shuffle = true, drop_last = true })
loader = acc:prepare(loader)

local CharLM = nn.Module:extend("CharLM")
function CharLM:init()
  self.tokens = nn.Embedding(vocab.vocab_size, d_model)
  self.positions = nn.Embedding(seq_len, d_model)
  self.blocks = nn.ModuleList()
  -- No dropout: the run is short, and dropout would only slow the fit.
  for _ = 1, layers do
    self.blocks:append(nn.TransformerEncoderLayer(d_model, heads, {
      dim_feedforward = 4 * d_model, dropout = 0, activation = "gelu", norm_first = true, is_causal = true }))
  end
  self.norm = nn.LayerNorm(d_model)
  self.head = nn.Linear(d_model, vocab.vocab_size)
end
function CharLM:forward(ids)                           -- ids: (batch, length), length <= seq_len
  local length = ids:size(2)
  local x = self.tokens(ids) + self.positions(accel.arange(1, length + 1, { device = ids.device }))
  for _, block in ipairs(self.blocks) do x = block(x) end
  return self.head(self.norm(x))                       -- logits: (batch, length, vocab)
end

local model = CharLM()
local opt = optim.AdamW(model:parameters(), { lr = config.lr, weight_decay = config.weight_decay })
local sched = optim.lr_scheduler.cosine(opt, { warmup = 50, total = steps, min_lr = 1e-4 })
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

-- Sampling: each next character is drawn from the model's distribution
-- (sharpened by a temperature) given at most the last seq_len characters.
local function sample(prompt, count, temperature)
  local ids = vocab:encode(prompt):totable()
  model:eval()
  accel.no_grad(function()
    for _ = 1, count do
      local context = {}
      for i = math.max(1, #ids - seq_len + 1), #ids do context[#context + 1] = ids[i] end
      local logits = model(accel.LongTensor({ context }):to(acc.device))[1][#context]
      local probs = F.softmax(logits / temperature, 1):totable()
      local u, id = math.random(), #probs
      for i, p in ipairs(probs) do
        u = u - p
        if u <= 0 then
          id = i
          break
        end
      end
      ids[#ids + 1] = id
    end
  end)
  return vocab:decode(ids)
end

if acc.is_main_process then
  print("sample:")
  print(sample("The ", 300, 0.8))
end
acc:end_training()
