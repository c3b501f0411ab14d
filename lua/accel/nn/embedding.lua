-- A lookup table of vectors, indexed by 1-based ids:
--   nn.Embedding(num_embeddings, embedding_dim, {padding_idx, max_norm,
--                norm_type = 2, scale_grad_by_freq = false, index_base = 1})
-- weight starts N(0, 1) (the padding row at zero, and it gets no gradient).
-- With index_base = 0 the ids, and padding_idx, count from 0: token ids as
-- tokenizers give them (the pretrained models of accel.models take those).
local core = require("accel.core")
local Module = require("accel.nn.module")
local args = require("accel.util.args")
local init = require("accel.nn.initialization")

local Embedding = Module:extend("Embedding")

local defaults = { padding_idx = args.NONE, max_norm = args.NONE, norm_type = 2, scale_grad_by_freq = false,
                   index_base = 1 }
local types = { padding_idx = "number", max_norm = "number", norm_type = "number", scale_grad_by_freq = "boolean",
                index_base = "number" }

-- padding_idx as a 1-based row (negative counts from the end).
local function resolve_padding(n, padding_idx, base)
  if padding_idx == nil then return nil end
  local row = padding_idx < 0 and n + 1 + padding_idx or padding_idx + 1 - base
  if padding_idx % 1 ~= 0 or padding_idx < -n or row < 1 or row > n then
    args.error(string.format("nn.Embedding: padding_idx %s is out of range (%d-based: %d to %d, or -1 to -%d)",
                             tostring(padding_idx), base, base, n - 1 + base, n))
  end
  return row
end

function Embedding:init(num_embeddings, embedding_dim, options)
  args.positive_integer("nn.Embedding", "num_embeddings", num_embeddings)
  args.positive_integer("nn.Embedding", "embedding_dim", embedding_dim)
  local o = args.options("nn.Embedding", options, defaults, types)
  if o.index_base ~= 0 and o.index_base ~= 1 then
    args.error("nn.Embedding: index_base must be 0 or 1, got " .. tostring(o.index_base))
  end
  self.num_embeddings, self.embedding_dim, self.index_base = num_embeddings, embedding_dim, o.index_base
  -- Kept 1-based (the row), whatever the ids count from.
  self.padding_idx = resolve_padding(num_embeddings, o.padding_idx, o.index_base)
  self.max_norm, self.norm_type, self.scale_grad_by_freq = o.max_norm, o.norm_type, o.scale_grad_by_freq
  local weight = init.normal_(core.empty(num_embeddings, embedding_dim))
  if self.padding_idx then weight[self.padding_idx] = 0 end
  self.weight = weight:requires_grad_()
end

-- An Embedding holding a copy of `weight` (rows are the vectors); frozen
-- unless {freeze = false}. A frozen weight is kept as a buffer: it stays in
-- the state dict but not among the parameters. Other options as the
-- constructor's.
function Embedding.from_pretrained(weight, options)
  if type(weight) ~= "userdata" or weight:dim() ~= 2 then
    args.error("nn.Embedding.from_pretrained: expected a 2-D weight tensor, got " ..
               (type(weight) == "userdata" and args.shape(weight) or type(weight)))
  end
  local pretrained_defaults, pretrained_types = { freeze = true }, { freeze = "boolean" }
  for k, v in pairs(defaults) do pretrained_defaults[k], pretrained_types[k] = v, types[k] end
  args.options("nn.Embedding.from_pretrained", options, pretrained_defaults, pretrained_types)
  options = options or {}
  local freeze = options.freeze ~= false
  local rest = {}
  for k, v in pairs(options) do
    if k ~= "freeze" then rest[k] = v end
  end
  local emb = Embedding(weight:size(1), weight:size(2), rest)
  local copy = weight:detach():clone()
  if freeze then
    emb:register_buffer("weight", copy)
  else
    emb.weight = copy:requires_grad_()
  end
  return emb
end

function Embedding:forward(ids)
  return core.functional.embedding(ids, self.weight, {
    padding_idx = self.padding_idx and self.padding_idx - 1 + self.index_base,
    index_base = self.index_base,
    max_norm = self.max_norm,
    norm_type = self.norm_type,
    scale_grad_by_freq = self.scale_grad_by_freq,
  })
end

function Embedding:__tostring()
  return string.format("Embedding(%d, %d%s%s)", self.num_embeddings, self.embedding_dim,
                       self.padding_idx and (", padding_idx " .. (self.padding_idx - 1 + self.index_base)) or "",
                       self.index_base == 0 and ", 0-based ids" or "")
end

return Embedding
