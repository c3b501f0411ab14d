-- The transformer language model of recipes/sharded_lm.lua, shared with the
-- sharding benchmark (bench/sharding_memory/lm.lua), whose PyTorch twin
-- (lm.py) mirrors it:
--   local ShardedLM = dofile("recipes/sharded_lm_model.lua")
--   local model = ShardedLM{ vocab = 96, seq = 64, width = 768, heads = 12, layers = 14 }
-- FSDP wraps its `Block`s (transformer_layer_cls = "Block").
local nn, F = accel.nn, accel.nn.functional

-- Pre-norm transformer block: causal self-attention, then a 4x GELU feed-forward.
local Block = nn.Module:extend("Block")
function Block:init(width, heads)
  self.norm1 = nn.LayerNorm(width)
  self.attn = nn.MultiheadAttention(width, heads)
  self.norm2 = nn.LayerNorm(width)
  self.fc = nn.Linear(width, 4 * width)
  self.proj = nn.Linear(4 * width, width)
end
function Block:forward(x)
  local h = self.norm1(x)
  x = x + self.attn(h, h, h, { is_causal = true, need_weights = false })
  return x + self.proj(F.gelu(self.fc(self.norm2(x))))
end

local ShardedLM = nn.Module:extend("ShardedLM")
function ShardedLM:init(config)
  self.tokens = nn.Embedding(config.vocab, config.width)
  self.positions = nn.Embedding(config.seq, config.width)
  self.blocks = nn.ModuleList()
  for _ = 1, config.layers do self.blocks:append(Block(config.width, config.heads)) end
  self.norm = nn.LayerNorm(config.width)
  self.head = nn.Linear(config.width, config.vocab)
end
function ShardedLM:forward(ids)                        -- ids: (batch, length), length <= seq
  local x = self.tokens(ids) + self.positions(accel.arange(1, ids:size(2) + 1, { device = ids.device }))
  for _, block in ipairs(self.blocks) do x = block(x) end
  return self.head(self.norm(x))                       -- logits: (batch, length, vocab)
end

return ShardedLM
