-- The character model of recipes/charlm.lua, a causal Transformer, and its
-- sampling, shared with recipes/generate.lua, which samples from what
-- charlm.lua saved:
--   local CharLM = dofile("recipes/charlm_model.lua")
--   local model = CharLM{ vocab_size = 96, seq_len = 64, d_model = 128, heads = 4, layers = 2 }
--   print(CharLM.sample(model, vocab, "The ", { count = 300, temperature = 0.8 }))
local nn, F = accel.nn, accel.nn.functional

local CharLM = nn.Module:extend("CharLM")
function CharLM:init(config)
  self.tokens = nn.Embedding(config.vocab_size, config.d_model)
  self.positions = nn.Embedding(config.seq_len, config.d_model)
  self.blocks = nn.ModuleList()
  -- No dropout: the run is short, and dropout would only slow the fit.
  for _ = 1, config.layers do
    self.blocks:append(nn.TransformerEncoderLayer(config.d_model, config.heads, {
      dim_feedforward = 4 * config.d_model, dropout = 0, activation = "gelu", norm_first = true, is_causal = true }))
  end
  self.norm = nn.LayerNorm(config.d_model)
  self.head = nn.Linear(config.d_model, config.vocab_size)
end
function CharLM:forward(ids)                           -- ids: (batch, length), length <= seq_len
  local length = ids:size(2)
  local x = self.tokens(ids) + self.positions(accel.arange(1, length + 1, { device = ids.device }))
  for _, block in ipairs(self.blocks) do x = block(x) end
  return self.head(self.norm(x))                       -- logits: (batch, length, vocab)
end

-- Extends `prompt` by `o.count` characters, each drawn (with math.random)
-- from the model's distribution given at most the last `o.seq_len`
-- characters, sharpened by `o.temperature` and, with `o.top_k`, limited to
-- the k likeliest. `o.device`: where the model computes (default "cpu").
function CharLM.sample(model, vocab, prompt, o)
  local ids = vocab:encode(prompt):totable()
  accel.no_grad(function()
    for _ = 1, o.count do
      local context = {}
      for i = math.max(1, #ids - o.seq_len + 1), #ids do context[#context + 1] = ids[i] end
      local logits = model(accel.LongTensor({ context }):to(o.device or "cpu"))[1][#context]
      local choices
      if o.top_k then
        local indices
        logits, indices = logits:topk(o.top_k)
        choices = indices:totable()
      end
      local probs = F.softmax(logits / o.temperature, 1):totable()
      local u, pick = math.random(), #probs
      for i, p in ipairs(probs) do
        u = u - p
        if u <= 0 then
          pick = i
          break
        end
      end
      ids[#ids + 1] = choices and choices[pick] or pick
    end
  end)
  return vocab:decode(ids)
end

return CharLM
