-- A small transformer-like model for the big-model loading tests: an
-- embedding, three blocks (two Linears and a LayerNorm each), a head and an
-- integer buffer, so placement, splitting and dtype rules all have
-- something to act on. save(model, folder, options) writes it as save_model does.
local nn = accel.nn
local ck = require("accel.core").formats

local big_model = {}

local Block = nn.Module:extend("Block")
function Block:init(d)
  self.fc1 = nn.Linear(d, 2 * d)
  self.fc2 = nn.Linear(2 * d, d)
  self.norm = nn.LayerNorm(d)
end
function Block:forward(x)
  return self.norm(x + self.fc2(self.fc1(x):relu()))
end

local Model = nn.Module:extend("Model")
function Model:init(vocab, d, length)
  self.embed = nn.Embedding(vocab, d)
  self.blocks = nn.ModuleList({ Block(d), Block(d), Block(d) })
  self.head = nn.Linear(d, vocab)
  self:register_buffer("positions", accel.arange(1, length + 1))
end
function Model:forward(ids)
  local x = self.embed(ids) + self.positions:to(self.head.weight.dtype):view(1, -1, 1) * 0.01
  for _, block in ipairs(self.blocks) do x = block(x) end
  return self.head(x)
end

big_model.vocab, big_model.dim, big_model.length = 64, 32, 8

function big_model.build()
  return Model(big_model.vocab, big_model.dim, big_model.length)
end

function big_model.save(model, folder, options)
  local state = {}
  for name, p in model:named_parameters() do state[#state + 1] = { name, p } end
  for name, b in model:named_buffers() do state[#state + 1] = { name, b } end
  return ck.save_weights(folder, state, options)
end

-- Two rows of token ids, 1-based.
function big_model.ids()
  local rows = {}
  for r = 1, 2 do
    rows[r] = {}
    for i = 1, big_model.length do rows[r][i] = (r * 7 + i * 5) % big_model.vocab + 1 end
  end
  return accel.LongTensor(rows)
end

return big_model
