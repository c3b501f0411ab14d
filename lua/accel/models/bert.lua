-- The BERT encoder (BertModel), with transformers' parameter names, so a
-- Hugging Face checkpoint (sentence-transformers' all-MiniLM-L6-v2, say)
-- loads as it is:
--   embeddings {word_embeddings + position_embeddings + token_type_embeddings,
--   LayerNorm} -> encoder.layer.N {attention {self {query, key, value},
--   output {dense, LayerNorm}}, intermediate.dense, output {dense, LayerNorm}}
--   -> pooler.dense (tanh of the first token's state)
-- Post-norm layers, bidirectional attention with the padding keys masked.
--   local out = model{input_ids = ids, attention_mask = m, token_type_ids = t}
--   out.last_hidden_state, out.pooler_output
--   local embeddings = F.normalize(bert.mean_pooling(out.last_hidden_state, m))
-- (mean pooling then L2 normalisation: sentence-transformers' embeddings).
-- A checkpoint's embeddings.position_ids buffer (older transformers saved
-- it) is not a weight here: the loader leaves names the model lacks alone.
local core = require("accel.core")
local F = core.functional
local nn = require("accel.nn")
local args = require("accel.util.args")
local config = require("accel.models.config")
local activations = require("accel.models.activations")
local attention_mask = require("accel.models.attention_mask")
local PreTrainedModel = require("accel.models.pretrained_model")

local bert = {}

-- transformers' BertConfig defaults, but for the sizes a checkpoint's
-- weights must match (vocab_size, hidden_size, num_hidden_layers,
-- num_attention_heads, intermediate_size): those are required, as
-- llama.lua says.
bert.defaults = {
  hidden_act = "gelu", hidden_dropout_prob = 0.1, attention_probs_dropout_prob = 0.1, max_position_embeddings = 512,
  type_vocab_size = 2, initializer_range = 0.02, layer_norm_eps = 1e-12, pad_token_id = 0, use_cache = true,
  is_decoder = false, add_cross_attention = false,
}

function bert.settings(cfg)
  local source = config.source(cfg)
  if config.get(cfg, "is_decoder", "boolean", false) or config.get(cfg, "add_cross_attention", "boolean", false) then
    args.error(source .. ": is_decoder and add_cross_attention are not supported (BERT as an encoder only)")
  end
  local position_type = config.optional(cfg, "position_embedding_type", "string")
  if position_type and position_type ~= "absolute" then
    args.error(string.format("%s: position_embedding_type '%s' is not supported (only 'absolute')", source,
                             position_type))
  end
  local hidden = config.get(cfg, "hidden_size", "count")
  local heads = config.get(cfg, "num_attention_heads", "count")
  if hidden % heads ~= 0 then
    args.error(string.format("%s: hidden_size %d is not a multiple of num_attention_heads %d", source, hidden,
                             heads))
  end
  return {
    source = source,
    hidden = hidden,
    heads = heads,
    head_dim = math.floor(hidden / heads),
    intermediate = config.get(cfg, "intermediate_size", "count"),
    layers = config.get(cfg, "num_hidden_layers", "count"),
    vocab = config.get(cfg, "vocab_size", "count"),
    positions = config.get(cfg, "max_position_embeddings", "count", 512),
    token_types = config.get(cfg, "type_vocab_size", "count", 2),
    pad = config.optional(cfg, "pad_token_id", "number"),
    eps = config.get(cfg, "layer_norm_eps", "number", 1e-12),
    act = activations.of(cfg, "hidden_act", "gelu"),
    hidden_dropout = config.get(cfg, "hidden_dropout_prob", "number", 0.1),
    attention_dropout = config.get(cfg, "attention_probs_dropout_prob", "number", 0.1),
  }
end

-- `ids` through `embedding` (0-based); an id outside its table is an error
-- naming the id, what it is and the config key that sizes the table.
local function lookup(embedding, ids, what, key, source)
  local ok, e = pcall(embedding, ids)
  if ok then return e end
  local id = tostring(e):match("id (%-?%d+) is out of range")
  if not id then error(e, 0) end
  local n = embedding.num_embeddings
  args.error(string.format("BertModel: %s %s is outside 0 to %d (%s %d in %s)", what, id, n - 1, key, n, source))
end

local known_inputs = { input_ids = true, attention_mask = true, token_type_ids = true, position_ids = true }

-- The inputs table of a call: known keys, integer (B, T) input_ids, and
-- the others of its shape (position_ids may be (1, T)).
local function check_inputs(inputs)
  local where = "BertModel"
  if type(inputs) ~= "table" then
    args.error(string.format("%s: call the model with a table {input_ids = ..., attention_mask = ..., "
                             .. "token_type_ids = ...}, got a %s", where, type(inputs)))
  end
  for key in pairs(inputs) do
    if not known_inputs[key] then
      args.error(string.format("%s: unknown input '%s' (known: attention_mask, input_ids, position_ids, "
                               .. "token_type_ids)", where, tostring(key)))
    end
  end
  local ids = inputs.input_ids
  if type(ids) ~= "userdata" or ids:dim() ~= 2 or ids:is_floating_point() then
    args.error(string.format("%s: input_ids must be an integer (batch, sequence) tensor of token ids, got %s", where,
                             type(ids) == "userdata" and (ids.dtype .. " " .. args.shape(ids)) or type(ids)))
  end
  local B, T = ids:size(1), ids:size(2)
  for _, key in ipairs({ "attention_mask", "token_type_ids", "position_ids" }) do
    local t = inputs[key]
    if t ~= nil then
      local rows_ok = type(t) == "userdata" and t:dim() == 2 and t:size(2) == T
                      and (t:size(1) == B or (key == "position_ids" and t:size(1) == 1))
      if not rows_ok then
        args.error(string.format("%s: %s must be (batch, sequence) = (%d, %d), got %s", where, key, B, T,
                                 type(t) == "userdata" and args.shape(t) or type(t)))
      end
      if key ~= "attention_mask" and t:is_floating_point() then
        args.error(string.format("%s: %s must be an integer tensor, got %s", where, key, t.dtype))
      end
    end
  end
end

---------------------------------------------------------------------------
local BertEmbeddings = nn.Module:extend("BertEmbeddings")

function BertEmbeddings:init(s)
  self.word_embeddings = nn.Embedding(s.vocab, s.hidden, { padding_idx = s.pad, index_base = 0 })
  self.position_embeddings = nn.Embedding(s.positions, s.hidden, { index_base = 0 })
  self.token_type_embeddings = nn.Embedding(s.token_types, s.hidden, { index_base = 0 })
  self.LayerNorm = nn.LayerNorm(s.hidden, { eps = s.eps })
  self.dropout = nn.Dropout(s.hidden_dropout)
  rawset(self, "source", s.source)
end

-- Token types default to 0 and positions to 0, 1, ... as transformers'.
function BertEmbeddings:forward(inputs)
  local ids = inputs.input_ids
  local B, T = ids:size(1), ids:size(2)
  local h = lookup(self.word_embeddings, ids, "token id", "vocab_size", self.source)
  local types = inputs.token_type_ids or core.zeros({ B, T }, { dtype = "int64", device = h.device })
  local positions = inputs.position_ids or core.arange(0, T, { dtype = "int64", device = h.device }):view(1, T)
  h = h + lookup(self.token_type_embeddings, types, "token type id", "type_vocab_size", self.source)
  h = h + lookup(self.position_embeddings, positions, "position", "max_position_embeddings", self.source)
  return self.dropout(self.LayerNorm(h))
end

---------------------------------------------------------------------------
local BertSelfAttention = nn.Module:extend("BertSelfAttention")

function BertSelfAttention:init(s)
  self.query = nn.Linear(s.hidden, s.hidden)
  self.key = nn.Linear(s.hidden, s.hidden)
  self.value = nn.Linear(s.hidden, s.hidden)
  rawset(self, "heads", s.heads)
  rawset(self, "head_dim", s.head_dim)
  rawset(self, "dropout", s.attention_dropout)
end

function BertSelfAttention:forward(x, mask)
  local B, T, H, d = x:size(1), x:size(2), self.heads, self.head_dim
  local q = self.query(x):view(B, T, H, d):transpose(2, 3)
  local k = self.key(x):view(B, T, H, d):transpose(2, 3)
  local v = self.value(x):view(B, T, H, d):transpose(2, 3)
  local out = F.scaled_dot_product_attention(q, k, v, {
    attn_mask = mask,
    scale = d ^ -0.5,
    dropout_p = self.training and self.dropout or 0,
  })
  return out:transpose(2, 3):reshape(B, T, H * d)
end

-- dense, dropout, then LayerNorm of the residual sum: BertSelfOutput and
-- BertOutput, which differ in their input width only.
local function residual_output(name)
  local cls = nn.Module:extend(name)
  function cls:init(s, width)
    self.dense = nn.Linear(width, s.hidden)
    self.LayerNorm = nn.LayerNorm(s.hidden, { eps = s.eps })
    self.dropout = nn.Dropout(s.hidden_dropout)
  end
  function cls:forward(x, residual)
    return self.LayerNorm(self.dropout(self.dense(x)) + residual)
  end
  return cls
end
local BertSelfOutput = residual_output("BertSelfOutput")
local BertOutput = residual_output("BertOutput")

local BertAttention = nn.Module:extend("BertAttention")

function BertAttention:init(s)
  self.self = BertSelfAttention(s)
  self.output = BertSelfOutput(s, s.hidden)
end

function BertAttention:forward(h, mask)
  return self.output(self.self(h, mask), h)
end

local BertIntermediate = nn.Module:extend("BertIntermediate")

function BertIntermediate:init(s)
  self.dense = nn.Linear(s.hidden, s.intermediate)
  rawset(self, "act", s.act)
end

function BertIntermediate:forward(x)
  return self.act(self.dense(x))
end

---------------------------------------------------------------------------
local BertLayer = nn.Module:extend("BertLayer")

function BertLayer:init(s)
  self.attention = BertAttention(s)
  self.intermediate = BertIntermediate(s)
  self.output = BertOutput(s, s.intermediate)
end

function BertLayer:forward(h, mask)
  h = self.attention(h, mask)
  return self.output(self.intermediate(h), h)
end

local BertEncoder = nn.Module:extend("BertEncoder")

function BertEncoder:init(s)
  local layers = {}
  for _ = 1, s.layers do layers[#layers + 1] = BertLayer(s) end
  self.layer = nn.ModuleList(layers, { index_base = 0 })
end

function BertEncoder:forward(h, mask)
  for _, layer in ipairs(self.layer) do h = layer(h, mask) end
  return h
end

local BertPooler = nn.Module:extend("BertPooler")

function BertPooler:init(s)
  self.dense = nn.Linear(s.hidden, s.hidden)
end

-- The first token's ([CLS]) state through dense and tanh.
function BertPooler:forward(h)
  return self.dense(h:select(2, 1)):tanh()
end

---------------------------------------------------------------------------
local BertModel = PreTrainedModel:extend("BertModel")
bert.BertModel = BertModel
-- transformers' names: the layers a device map never splits, and the base
-- model's field (models/from_pretrained.lua).
BertModel._no_split_modules = { "BertEmbeddings", "BertLayer" }
BertModel.base_model_prefix = "bert"

-- options: {add_pooling_layer = true}, as transformers' BertModel(config,
-- add_pooling_layer).
function BertModel:init(cfg, options)
  local o = args.options("BertModel", options, { add_pooling_layer = true }, { add_pooling_layer = "boolean" })
  local s = bert.settings(cfg)
  rawset(self, "config", cfg)
  self.embeddings = BertEmbeddings(s)
  self.encoder = BertEncoder(s)
  if o.add_pooling_layer then self.pooler = BertPooler(s) end
end

-- model{input_ids, attention_mask, token_type_ids, position_ids}
-- -> {last_hidden_state (B, T, hidden), pooler_output (B, hidden)}
function BertModel:forward(inputs)
  check_inputs(inputs)
  local h = self.embeddings(inputs)
  h = self.encoder(h, attention_mask.padding(inputs.attention_mask, h.dtype, h.device))
  return { last_hidden_state = h, pooler_output = self.pooler and self.pooler(h) or nil }
end

-- sentence-transformers' mean pooling: the mean of the states where
-- attention_mask is 1 (every state without a mask), (B, T, D) -> (B, D);
-- a row without tokens gives zeros (its count is clamped at 1e-9).
function bert.mean_pooling(last_hidden_state, attention_mask)
  local h = last_hidden_state
  if type(h) ~= "userdata" or h:dim() ~= 3 then
    args.error("mean_pooling: last_hidden_state must be (batch, sequence, hidden), got "
               .. (type(h) == "userdata" and args.shape(h) or type(h)))
  end
  if attention_mask == nil then return h:mean(2) end
  local B, T = h:size(1), h:size(2)
  if type(attention_mask) ~= "userdata" or attention_mask:dim() ~= 2 or attention_mask:size(1) ~= B
     or attention_mask:size(2) ~= T then
    args.error(string.format("mean_pooling: attention_mask must be (batch, sequence) = (%d, %d), got %s", B, T,
                             type(attention_mask) == "userdata" and args.shape(attention_mask)
                             or type(attention_mask)))
  end
  local weights = attention_mask:to(h.device):view(B, T, 1):to(h.dtype)
  return (h * weights):sum(2) / weights:sum(2):clamp(1e-9)
end

return bert
