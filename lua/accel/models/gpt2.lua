-- The GPT-2 architecture (GPT2LMHeadModel), with transformers' parameter
-- names, so a Hugging Face checkpoint loads as it is:
--   transformer.wte (tokens) + transformer.wpe (learned positions) ->
--   transformer.h.N {ln_1, attn {c_attn, c_proj}, ln_2, mlp {c_fc, c_proj}}
--   -> transformer.ln_f -> lm_head (tied to wte unless tie_word_embeddings
--   is false)
-- Pre-norm blocks with LayerNorm, causal multi-head attention through
-- F.scaled_dot_product_attention (a key/value cache while generating) and a
-- GELU MLP. Its projections are Conv1D, GPT-2's linear layer whose weight is
-- stored [in, out] (transposed from nn.Linear's), as the checkpoints hold it.
local core = require("accel.core")
local F = core.functional
local nn = require("accel.nn")
local args = require("accel.util.args")
local config = require("accel.models.config")
local activations = require("accel.models.activations")
local attention_mask = require("accel.models.attention_mask")
local causal_lm = require("accel.models.causal_lm")
local PreTrainedModel = require("accel.models.pretrained_model")

local gpt2 = {}

-- transformers' GPT2Config defaults, but for the sizes a checkpoint's
-- weights must match (vocab_size, n_embd, n_layer, n_head): those are
-- required, as llama.lua says. n_inner's default (null: 4 * n_embd) is
-- applied where it is read; n_positions' once max_position_embeddings, its
-- alias, has been read.
gpt2.defaults = {
  activation_function = "gelu_new", resid_pdrop = 0.1, embd_pdrop = 0.1, attn_pdrop = 0.1,
  layer_norm_epsilon = 1e-5, initializer_range = 0.02, scale_attn_weights = true, use_cache = true,
  bos_token_id = 50256, eos_token_id = 50256, scale_attn_by_inverse_layer_idx = false,
  reorder_and_upcast_attn = false, add_cross_attention = false, tie_word_embeddings = true,
}

-- GPT2Config's attribute_map: the common names a config table may use
-- instead of GPT-2's own, which are the ones config.json holds.
local aliases = { hidden_size = "n_embd", max_position_embeddings = "n_positions", num_attention_heads = "n_head",
                  num_hidden_layers = "n_layer" }

local function use_own_names(cfg)
  for alias, name in pairs(aliases) do
    local v = cfg[alias]
    if v ~= nil then
      if cfg[name] ~= nil and cfg[name] ~= v then
        args.error(string.format("%s: '%s' (%s) and '%s' (%s) are one setting of GPT-2 and disagree",
                                 config.source(cfg), alias, tostring(v), name, tostring(cfg[name])))
      end
      cfg[name], cfg[alias] = v, nil
    end
  end
end

function gpt2.settings(cfg)
  use_own_names(cfg)
  config.fill(cfg, { n_positions = 1024 })
  if config.get(cfg, "add_cross_attention", "boolean", false) then
    args.error(config.source(cfg) .. ": add_cross_attention is not supported (GPT-2 as a decoder only)")
  end
  local hidden = config.get(cfg, "n_embd", "count")
  local heads = config.get(cfg, "n_head", "count")
  if hidden % heads ~= 0 then
    args.error(string.format("%s: n_embd %d is not a multiple of n_head %d", config.source(cfg), hidden, heads))
  end
  return {
    hidden = hidden,
    heads = heads,
    head_dim = math.floor(hidden / heads),
    inner = config.get(cfg, "n_inner", "count", 4 * hidden),
    layers = config.get(cfg, "n_layer", "count"),
    vocab = config.get(cfg, "vocab_size", "count"),
    positions = config.get(cfg, "n_positions", "count"),
    eps = config.get(cfg, "layer_norm_epsilon", "number", 1e-5),
    act = activations.of(cfg, "activation_function", "gelu_new"),
    resid_pdrop = config.get(cfg, "resid_pdrop", "number", 0.1),
    embd_pdrop = config.get(cfg, "embd_pdrop", "number", 0.1),
    attn_pdrop = config.get(cfg, "attn_pdrop", "number", 0.1),
    scale = config.get(cfg, "scale_attn_weights", "boolean", true),
    scale_by_layer = config.get(cfg, "scale_attn_by_inverse_layer_idx", "boolean", false),
    upcast = config.get(cfg, "reorder_and_upcast_attn", "boolean", false),
    tie = config.get(cfg, "tie_word_embeddings", "boolean", true),
  }
end

---------------------------------------------------------------------------
-- y = x W + b with W [in, out]: GPT-2's (and GPT's) Conv1D.
local Conv1D = nn.Module:extend("Conv1D")
gpt2.Conv1D = Conv1D

function Conv1D:init(in_features, out_features)
  self.weight = nn.init.normal_(core.empty(in_features, out_features), 0, 0.02):requires_grad_()
  self.bias = core.zeros(out_features, { requires_grad = true })
end

function Conv1D:forward(x)
  return x:matmul(self.weight) + self.bias
end

function Conv1D:__tostring()
  return string.format("Conv1D(%d -> %d)", self.weight:size(1), self.weight:size(2))
end

---------------------------------------------------------------------------
local GPT2Attention = nn.Module:extend("GPT2Attention")

function GPT2Attention:init(s, layer_idx)
  self.c_attn = Conv1D(s.hidden, 3 * s.hidden)
  self.c_proj = Conv1D(s.hidden, s.hidden)
  self.resid_dropout = nn.Dropout(s.resid_pdrop)
  local scale = s.scale and s.head_dim ^ -0.5 or 1
  if s.scale_by_layer then scale = scale / (layer_idx + 1) end
  rawset(self, "scale", scale)
  rawset(self, "layer_idx", layer_idx)
  rawset(self, "heads", s.heads)
  rawset(self, "head_dim", s.head_dim)
  rawset(self, "dropout", s.attn_pdrop)
  rawset(self, "upcast", s.upcast)
end

-- x (B, T, hidden); mask additive (or nil); cache a KVCache (or nil).
function GPT2Attention:forward(x, mask, cache)
  local B, T, H, d = x:size(1), x:size(2), self.heads, self.head_dim
  local qkv = self.c_attn(x):split(H * d, -1)
  local q = qkv[1]:view(B, T, H, d):transpose(2, 3)
  local k = qkv[2]:view(B, T, H, d):transpose(2, 3)
  local v = qkv[3]:view(B, T, H, d):transpose(2, 3)
  if cache then k, v = cache:update(self.layer_idx + 1, k, v) end
  local dtype = q.dtype
  -- reorder_and_upcast_attn: the scores and softmax in float32 under half precision.
  if self.upcast then q, k, v, mask = q:float(), k:float(), v:float(), mask and mask:float() end
  local out = F.scaled_dot_product_attention(q, k, v, {
    attn_mask = mask,
    scale = self.scale,
    dropout_p = self.training and self.dropout or 0,
  }):to(dtype)
  return self.resid_dropout(self.c_proj(out:transpose(2, 3):reshape(B, T, H * d)))
end

---------------------------------------------------------------------------
local GPT2MLP = nn.Module:extend("GPT2MLP")

function GPT2MLP:init(s)
  self.c_fc = Conv1D(s.hidden, s.inner)
  self.c_proj = Conv1D(s.inner, s.hidden)
  self.dropout = nn.Dropout(s.resid_pdrop)
  rawset(self, "act", s.act)
end

function GPT2MLP:forward(x)
  return self.dropout(self.c_proj(self.act(self.c_fc(x))))
end

---------------------------------------------------------------------------
local GPT2Block = nn.Module:extend("GPT2Block")

function GPT2Block:init(s, layer_idx)
  self.ln_1 = nn.LayerNorm(s.hidden, { eps = s.eps })
  self.attn = GPT2Attention(s, layer_idx)
  self.ln_2 = nn.LayerNorm(s.hidden, { eps = s.eps })
  self.mlp = GPT2MLP(s)
end

function GPT2Block:forward(h, mask, cache)
  h = h + self.attn(self.ln_1(h), mask, cache)
  return h + self.mlp(self.ln_2(h))
end

---------------------------------------------------------------------------
local GPT2Model = nn.Module:extend("GPT2Model")

function GPT2Model:init(cfg, s)
  self.wte = nn.Embedding(s.vocab, s.hidden, { index_base = 0 })
  self.wpe = nn.Embedding(s.positions, s.hidden, { index_base = 0 })
  self.drop = nn.Dropout(s.embd_pdrop)
  local blocks = {}
  for i = 0, s.layers - 1 do blocks[#blocks + 1] = GPT2Block(s, i) end
  self.h = nn.ModuleList(blocks, { index_base = 0 })
  self.ln_f = nn.LayerNorm(s.hidden, { eps = s.eps })
  rawset(self, "source", config.source(cfg))
end

-- The learned position embeddings of `wpe` (a model's, or a pipeline
-- stage's: accel.parallel.pipeline.gpt2_stages); a position past
-- n_positions is an error naming it, the model (`where`) and its config
-- (`source`).
function gpt2.embed_positions(wpe, positions, where, source)
  local ok, e = pcall(wpe, positions)
  if not ok then
    local position = tostring(e):match("id (%-?%d+) is out of range")
    if not position then error(e, 0) end
    args.error(string.format("%s: position %s is outside the learned positions (0 to %d: n_positions %d in %s)",
                             where, position, wpe.num_embeddings - 1, wpe.num_embeddings, source))
  end
  return e
end

-- The last hidden states (B, T, hidden). inputs: input_ids, attention_mask,
-- position_ids (default: past length onwards, as transformers' forward;
-- generate gives them from the mask), past_key_values (a KVCache, extended
-- in place).
function GPT2Model:forward(inputs)
  local ids, cache = inputs.input_ids, inputs.past_key_values
  local B, T = ids:size(1), ids:size(2)
  local h = causal_lm.embed(self.wte, ids, self.__name, self.source)
  local past = cache and cache:length() or 0
  local positions = inputs.position_ids
  if not positions then
    positions = core.arange(past, past + T, { dtype = "int64", device = h.device }):view(1, T)
  end
  h = self.drop(h + gpt2.embed_positions(self.wpe, positions, self.__name, self.source))
  local documents = attention_mask.documents(inputs.position_ids, cache, B)
  local mask = attention_mask.causal(inputs.attention_mask, B, T, past, { dtype = h.dtype, device = h.device,
                                                                          documents = documents })
  for _, block in ipairs(self.h) do h = block(h, mask, cache) end
  return self.ln_f(h)
end

---------------------------------------------------------------------------
local GPT2LMHeadModel = PreTrainedModel:extend("GPT2LMHeadModel")
gpt2.GPT2LMHeadModel = GPT2LMHeadModel
-- transformers' names: the layers a device map never splits, and the base
-- model's field (models/from_pretrained.lua).
GPT2LMHeadModel._no_split_modules = { "GPT2Block" }
GPT2LMHeadModel.base_model_prefix = "transformer"

function GPT2LMHeadModel:init(cfg)
  local s = gpt2.settings(cfg)
  rawset(self, "config", cfg)
  self.transformer = GPT2Model(cfg, s)
  self.lm_head = nn.Linear(s.hidden, s.vocab, false)
  if s.tie then self.lm_head.weight = self.transformer.wte.weight end
end

-- model{input_ids, attention_mask, labels, position_ids, past_key_values}
-- -> {logits, loss (with labels), past_key_values}
function GPT2LMHeadModel:forward(inputs)
  causal_lm.check_inputs(inputs, self.__name)
  local h = causal_lm.kept_positions(self.transformer(inputs), inputs, self.__name)
  local logits, loss = causal_lm.logits_and_loss(self.lm_head, h, inputs, self.training)
  return causal_lm.output(logits, loss, inputs)
end

-- transformers' GPT-2 initialisation: every weight N(0, std^2), biases
-- zero, and the projections back onto the residual stream (c_proj) with
-- std / sqrt(2 * n_layer), as the GPT-2 paper scales them (two residual
-- additions per block).
function GPT2LMHeadModel:init_weights(std)
  PreTrainedModel.init_weights(self, std)
  local residual_std = std / math.sqrt(2 * #self.transformer.h)
  for _, m in ipairs(self:modules()) do
    if m.__name == "Conv1D" then
      nn.init.normal_(m.weight, 0, std)
      nn.init.zeros_(m.bias)
    end
  end
  for _, block in ipairs(self.transformer.h) do
    nn.init.normal_(block.attn.c_proj.weight, 0, residual_std)
    nn.init.normal_(block.mlp.c_proj.weight, 0, residual_std)
  end
  return self
end

return gpt2
