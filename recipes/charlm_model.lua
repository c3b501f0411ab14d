-- The character model of recipes/charlm.lua, a causal Transformer, shared
-- with recipes/generate.lua, which samples from what charlm.lua saved:
--   local CharLM = dofile("recipes/charlm_model.lua")
--   local model = CharLM{ vocab_size = 96, seq_len = 64, d_model = 128, heads = 4, layers = 2 }
local nn = accel.nn

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

return CharLM
