-- The Llama architecture (LlamaForCausalLM), with transformers' parameter
-- names, so a Hugging Face checkpoint loads as it is. Mistral (a sliding
-- window) and Qwen2 (q/k/v biases) are this decoder with other settings
-- (mistral.lua, qwen2.lua); Mixtral (mixtral.lua) swaps its MLP for experts.
--   model.embed_tokens -> layers.N {input_layernorm, self_attn {q,k,v,o}_proj,
--   post_attention_layernorm, mlp {gate,up,down}_proj} -> norm -> lm_head
-- Attention is grouped-query (num_key_value_heads), with rotary positions
-- (rope_theta, rope_scaling of Llama 3), through
-- F.scaled_dot_product_attention and a key/value cache while generating.
local core = require("accel.core")
local F = core.functional
local nn = require("accel.nn")
local config = require("accel.models.config")
local activations = require("accel.models.activations")
local attention_mask = require("accel.models.attention_mask")
local causal_lm = require("accel.models.causal_lm")
local PreTrainedModel = require("accel.models.pretrained_model")

local llama = {}

-- transformers' LlamaConfig defaults, but for the sizes a checkpoint's
-- weights must match (vocab_size, hidden_size, intermediate_size,
-- num_hidden_layers, num_attention_heads): those are required, since a
-- default there would build a model of another shape than its weights.
llama.defaults = {
  hidden_act = "silu", max_position_embeddings = 2048, initializer_range = 0.02, rms_norm_eps = 1e-6,
  bos_token_id = 1, eos_token_id = 2, tie_word_embeddings = false, attention_bias = false,
  attention_dropout = 0, mlp_bias = false,
}

-- The settings a variant changes; read from the config once. rope_theta:
-- the family's default (not filled into the config, which may carry it in
-- rope_parameters instead).
function llama.settings(cfg, rope_theta)
  local hidden = config.get(cfg, "hidden_size", "count")
  local heads = config.get(cfg, "num_attention_heads", "count")
  local bias = config.get(cfg, "attention_bias", "boolean", false)
  -- transformers 5 writes rope_parameters {rope_type, rope_theta, factor...};
  -- earlier versions, and most checkpoints, rope_theta and rope_scaling.
  local rope = config.optional(cfg, "rope_parameters", "table")
  return {
    hidden = hidden,
    heads = heads,
    kv_heads = config.get(cfg, "num_key_value_heads", "count", heads),
    head_dim = config.get(cfg, "head_dim", "count", math.floor(hidden / heads)),
    intermediate = config.get(cfg, "intermediate_size", "count"),
    layers = config.get(cfg, "num_hidden_layers", "count"),
    vocab = config.get(cfg, "vocab_size", "count"),
    eps = config.get(cfg, "rms_norm_eps", "number", 1e-6),
    qkv_bias = bias,
    o_bias = bias,
    mlp_bias = config.get(cfg, "mlp_bias", "boolean", false),
    attention_dropout = config.get(cfg, "attention_dropout", "number", 0),
    rope_theta = rope and rope.rope_theta or config.get(cfg, "rope_theta", "number", rope_theta or 10000),
    rope_scaling = rope or config.optional(cfg, "rope_scaling", "table"),
    partial_rotary_factor = config.get(cfg, "partial_rotary_factor", "number", 1),
    max_positions = config.optional(cfg, "max_position_embeddings", "number"),
    tie = config.get(cfg, "tie_word_embeddings", "boolean", false),
    pad = config.optional(cfg, "pad_token_id", "number"),
    -- Per layer (0-based): the sliding window of that layer, or nil.
    window = function() return nil end,
  }
end

---------------------------------------------------------------------------
local LlamaAttention = nn.Module:extend("LlamaAttention")
llama.Attention = LlamaAttention

function LlamaAttention:init(s, layer_idx)
  self.q_proj = nn.Linear(s.hidden, s.heads * s.head_dim, s.qkv_bias)
  self.k_proj = nn.Linear(s.hidden, s.kv_heads * s.head_dim, s.qkv_bias)
  self.v_proj = nn.Linear(s.hidden, s.kv_heads * s.head_dim, s.qkv_bias)
  self.o_proj = nn.Linear(s.heads * s.head_dim, s.hidden, s.o_bias)
  rawset(self, "layer_idx", layer_idx)
  rawset(self, "head_dim", s.head_dim)
  rawset(self, "dropout", s.attention_dropout)
end

-- x (B, T, hidden); cos, sin from the rotary embedding; mask additive (or
-- nil); cache a KVCache (or nil); positions (B, T), which the ring reads
-- packed documents from.
function LlamaAttention:forward(x, cos, sin, mask, cache, positions)
  local B, T, d = x:size(1), x:size(2), self.head_dim
  -- The head counts come from the projections' output widths, not the
  -- config: under tensor parallelism (accel.parallel.tensor_parallel,
  -- llama.tp_plan) q/k/v are column-parallel and give this rank's heads only.
  local q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
  local heads, kv_heads = q:size(3) / d, k:size(3) / d
  q = q:view(B, T, heads, d):transpose(2, 3)
  k = k:view(B, T, kv_heads, d):transpose(2, 3)
  v = v:view(B, T, kv_heads, d):transpose(2, 3)
  q, k = nn.RotaryEmbedding.apply(q, k, cos, sin)
  if cache then k, v = cache:update(self.layer_idx + 1, k, v) end
  local out = self:attention(q, k, v, mask, d ^ -0.5, positions)
  return self.o_proj(out:transpose(2, 3):reshape(B, T, heads * d))
end

-- The attention itself, over q (B, heads, T, d) and k, v (B, kv_heads, S,
-- d): scaled dot-product attention. The seam a parallelism replaces on a
-- module (the cp plan's ring_attention: accel.parallel.context_parallel),
-- which reads the tokens' positions (B, T) to keep packed documents apart.
function LlamaAttention:attention(q, k, v, mask, scale, _positions)
  return F.scaled_dot_product_attention(q, k, v, {
    attn_mask = mask,
    enable_gqa = q:size(2) ~= k:size(2),
    scale = scale,
    dropout_p = self.training and self.dropout or 0,
  })
end

---------------------------------------------------------------------------
local LlamaMLP = nn.Module:extend("LlamaMLP")
llama.MLP = LlamaMLP

function LlamaMLP:init(s, act)
  self.gate_proj = nn.Linear(s.hidden, s.intermediate, s.mlp_bias)
  self.up_proj = nn.Linear(s.hidden, s.intermediate, s.mlp_bias)
  self.down_proj = nn.Linear(s.intermediate, s.hidden, s.mlp_bias)
  rawset(self, "act", act)
end

function LlamaMLP:forward(x)
  return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))
end

---------------------------------------------------------------------------
local LlamaDecoderLayer = nn.Module:extend("LlamaDecoderLayer")
llama.DecoderLayer = LlamaDecoderLayer

-- `mlp` builds the feed-forward part (a Mixtral layer passes its experts).
function LlamaDecoderLayer:init(s, layer_idx, mlp_name, mlp)
  self.self_attn = LlamaAttention(s, layer_idx)
  self[mlp_name] = mlp
  self.input_layernorm = nn.RMSNorm(s.hidden, { eps = s.eps })
  self.post_attention_layernorm = nn.RMSNorm(s.hidden, { eps = s.eps })
  rawset(self, "mlp_name", mlp_name)
  rawset(self, "window", s.window(layer_idx))
end

-- masks: the additive masks by window (masks.full, masks[W]) and the
-- tokens' positions (masks.positions).
function LlamaDecoderLayer:forward(h, cos, sin, masks, cache)
  local mask = masks[self.window or "full"]
  h = h + self.self_attn(self.input_layernorm(h), cos, sin, mask, cache, masks.positions)
  return h + self[self.mlp_name](self.post_attention_layernorm(h))
end

---------------------------------------------------------------------------
local LlamaModel = nn.Module:extend("LlamaModel")
llama.Model = LlamaModel

-- make_mlp(layer_idx) -> name, module of each layer's feed-forward part.
function LlamaModel:init(cfg, s, make_mlp)
  self.embed_tokens = nn.Embedding(s.vocab, s.hidden, { padding_idx = s.pad, index_base = 0 })
  local layers = {}
  for i = 0, s.layers - 1 do layers[#layers + 1] = LlamaDecoderLayer(s, i, make_mlp(i)) end
  self.layers = nn.ModuleList(layers, { index_base = 0 })
  self.norm = nn.RMSNorm(s.hidden, { eps = s.eps })
  self.rotary_emb = nn.RotaryEmbedding(s.head_dim, { base = s.rope_theta, scaling = s.rope_scaling,
                                                     partial_rotary_factor = s.partial_rotary_factor,
                                                     max_position_embeddings = s.max_positions })
  local windows = {}
  for i = 0, s.layers - 1 do
    local w = s.window(i)
    if w then windows[w] = true end
  end
  rawset(self, "windows", windows)
  rawset(self, "source", config.source(cfg))
end

-- The last hidden states (B, T, hidden). inputs: input_ids, attention_mask,
-- position_ids, past_key_values (a KVCache, extended in place).
function LlamaModel:forward(inputs)
  local ids, cache = inputs.input_ids, inputs.past_key_values
  local B, T = ids:size(1), ids:size(2)
  local h = causal_lm.embed(self.embed_tokens, ids, self.__name, self.source)
  local past = cache and cache:length() or 0
  local positions = inputs.position_ids
  if not positions then
    positions = core.arange(past, past + T, { dtype = "int64", device = h.device }):view(1, T):expand(B, T)
  end
  local cos, sin = self.rotary_emb(positions, h.dtype)
  local mask = inputs.attention_mask
  -- Packed rows (position_ids restarting, no mask): attention stays within
  -- each document; over the ring, the positions say where documents start.
  local documents = attention_mask.documents(inputs.position_ids, cache, B)
  local options = { dtype = h.dtype, device = h.device, documents = documents }
  local masks = { full = attention_mask.causal(mask, B, T, past, options), positions = positions }
  for w in pairs(self.windows) do
    masks[w] = attention_mask.causal(mask, B, T, past, { dtype = h.dtype, device = h.device, sliding_window = w,
                                                         documents = documents })
  end
  for _, layer in ipairs(self.layers) do h = layer(h, cos, sin, masks, cache) end
  return self.norm(h)
end

---------------------------------------------------------------------------
-- How accel.parallel.context_parallel splits this decoder over a mesh's cp
-- dim: every attention goes around the cp group's ring, and no layer may
-- attend within a sliding window (the ring is causal over the whole
-- sequence). Every variant's plan (mistral.lua's windows are refused).
llama.cp_plan = {
  ["layers.*"] = "no_sliding_window",
  ["layers.*.self_attn"] = "ring_attention",
}

-- A causal language model of this decoder: LlamaForCausalLM and the
-- variants' classes, which differ in name and settings only.
function llama.causal_lm_class(name, settings, make_mlp)
  local cls = PreTrainedModel:extend(name)
  cls.cp_plan = llama.cp_plan
  -- transformers' names: the layers a device map never splits, and the
  -- base model's field (models/from_pretrained.lua).
  cls._no_split_modules = { "LlamaDecoderLayer" }
  cls.base_model_prefix = "model"

  function cls:init(cfg)
    local s = settings(cfg)
    rawset(self, "config", cfg)
    self.model = LlamaModel(cfg, s, make_mlp and make_mlp(cfg, s) or function()
      return "mlp", LlamaMLP(s, activations.of(cfg, "hidden_act", "silu"))
    end)
    self.lm_head = nn.Linear(s.hidden, s.vocab, false)
    if s.tie then self.lm_head.weight = self.model.embed_tokens.weight end
  end

  -- model{input_ids, attention_mask, labels, position_ids, past_key_values,
  -- skip_logits, num_items_in_batch} -> {logits, loss (with labels),
  -- past_key_values}; in training with labels the loss comes in chunks and
  -- logits only with skip_logits = false (chunked_loss.lua).
  function cls:forward(inputs)
    causal_lm.check_inputs(inputs, name)
    local h = self.model(inputs)
    local logits, loss = causal_lm.logits_and_loss(self.lm_head, causal_lm.kept_positions(h, inputs, name), inputs,
                                                   self.training)
    return causal_lm.output(logits, loss, inputs)
  end

  return cls
end

llama.LlamaForCausalLM = llama.causal_lm_class("LlamaForCausalLM", llama.settings)

-- How accel.parallel.tensor_parallel splits this model over a mesh's tp dim,
-- as transformers' LlamaForCausalLM tp plan: heads and the MLP's hidden units
-- split (q/k/v, gate/up column-parallel; o/down row-parallel), the embedding
-- split over the vocabulary, lm_head column-parallel with its logits gathered
-- (so model{labels} stays right); a recipe that wants no rank to hold full
-- logits gives lm_head = "colwise" and accel.parallel.vocab_parallel_cross_entropy.
llama.tp_plan = {
  embed_tokens = "vocab_embedding",
  ["layers.*.self_attn.q_proj"] = "colwise",
  ["layers.*.self_attn.k_proj"] = "colwise",
  ["layers.*.self_attn.v_proj"] = "colwise",
  ["layers.*.self_attn.o_proj"] = "rowwise",
  ["layers.*.mlp.gate_proj"] = "colwise",
  ["layers.*.mlp.up_proj"] = "colwise",
  ["layers.*.mlp.down_proj"] = "rowwise",
  lm_head = "colwise_gather",
}
llama.LlamaForCausalLM.tp_plan = llama.tp_plan

-- The same split with sequence parallelism (tensor_parallel(model, mesh,
-- nil, {sequence_parallel = true}), as torchtitan's Llama plan): between
-- attention and MLP the activations are split over the sequence, so the
-- norms and residual adds run on 1/tp of the positions. The embedding's
-- output and o/down's are reduce-scattered over the sequence; attention and
-- the MLP gather it at their input; lm_head gathers it before its logits.
llama.sp_plan = {}
for pattern, kind in pairs(llama.tp_plan) do llama.sp_plan[pattern] = kind end
for pattern, kind in pairs({
  embed_tokens = "vocab_embedding_sequence",
  ["layers.*.input_layernorm"] = "sequence_parallel",
  ["layers.*.self_attn"] = "gather_sequence",
  ["layers.*.self_attn.o_proj"] = "rowwise_sequence",
  ["layers.*.post_attention_layernorm"] = "sequence_parallel",
  ["layers.*.mlp"] = "gather_sequence",
  ["layers.*.mlp.down_proj"] = "rowwise_sequence",
  norm = "sequence_parallel",
  lm_head = "colwise_gather_sequence",
}) do llama.sp_plan[pattern] = kind end
llama.LlamaForCausalLM.sp_plan = llama.sp_plan

return llama
