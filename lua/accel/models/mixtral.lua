-- The Mixtral architecture (MixtralForCausalLM): the Llama decoder (with
-- Mistral's optional sliding window) whose MLP is a sparse mixture of
-- experts. Each token's router (block_sparse_moe.gate) picks the top
-- num_experts_per_tok of num_local_experts by softmax probability, in
-- float32; their weights are renormalised to sum to one, and the token's
-- output is the weighted sum of those experts' SiLU-gated MLPs (w1 gate,
-- w3 up, w2 down). Names are the checkpoints' own
-- (model.layers.N.block_sparse_moe.experts.M.w1.weight), which
-- transformers also writes. With output_router_logits the output also has
-- router_logits (each layer's gate logits, [B*T, experts]) and aux_loss,
-- the Switch Transformer load-balancing loss, and `loss` adds
-- router_aux_loss_coef times it, as MixtralForCausalLM does.
local core = require("accel.core")
local F = core.functional
local nn = require("accel.nn")
local args = require("accel.util.args")
local config = require("accel.models.config")
local activations = require("accel.models.activations")
local llama = require("accel.models.llama")
local mistral = require("accel.models.mistral")

local mixtral = {}

-- transformers' MixtralConfig defaults (sizes required, as llama.lua says).
mixtral.defaults = {
  hidden_act = "silu", max_position_embeddings = 4096 * 32, initializer_range = 0.02, rms_norm_eps = 1e-5,
  bos_token_id = 1, eos_token_id = 2, tie_word_embeddings = false, attention_dropout = 0,
  num_experts_per_tok = 2, num_local_experts = 8, output_router_logits = false, router_aux_loss_coef = 0.001,
  router_jitter_noise = 0,
}

local Expert = nn.Module:extend("MixtralBlockSparseTop2MLP")

function Expert:init(hidden, intermediate, act)
  self.w1 = nn.Linear(hidden, intermediate, false)
  self.w2 = nn.Linear(intermediate, hidden, false)
  self.w3 = nn.Linear(hidden, intermediate, false)
  rawset(self, "act", act)
end

function Expert:forward(x)
  return self.w2(self.act(self.w1(x)) * self.w3(x))
end

local SparseMoeBlock = nn.Module:extend("MixtralSparseMoeBlock")
mixtral.SparseMoeBlock = SparseMoeBlock

function SparseMoeBlock:init(s, cfg)
  local experts = config.get(cfg, "num_local_experts", "count")
  local top_k = config.get(cfg, "num_experts_per_tok", "count")
  if top_k > experts then
    args.error(string.format("%s: num_experts_per_tok %d is more than num_local_experts %d", config.source(cfg),
                             top_k, experts))
  end
  self.gate = nn.Linear(s.hidden, experts, false)
  local list = {}
  for i = 1, experts do list[i] = Expert(s.hidden, s.intermediate, activations.of(cfg, "hidden_act", "silu")) end
  self.experts = nn.ModuleList(list, { index_base = 0 })
  rawset(self, "top_k", top_k)
  rawset(self, "jitter", config.get(cfg, "router_jitter_noise", "number", 0))
end

-- The router's choice for `h` [B, T, H]: the tokens x [B*T, H], each one's
-- top_k weights (summing to 1) and chosen experts (1-based numbers, [B*T,
-- top_k]). Also the split experts' forward's (accel.parallel.expert_parallel).
function SparseMoeBlock:route(h)
  local B, T, H = h:size(1), h:size(2), h:size(3)
  if self.training and self.jitter > 0 then
    h = h * core.empty_like(h):uniform_(1 - self.jitter, 1 + self.jitter)
  end
  local x = h:reshape(B * T, H)
  local logits = self.gate(x)
  -- Set by the causal LM's forward while it collects the router logits.
  local sink = rawget(self, "router_sink")
  if sink then sink[#sink + 1] = logits end
  local probs = F.softmax(logits:float(), -1)
  local top, chosen = probs:topk(self.top_k, -1)
  return x, top / top:sum(-1, true), chosen
end

function SparseMoeBlock:forward(h)
  local B, T, H = h:size(1), h:size(2), h:size(3)
  local x, top, chosen = self:route(h)
  local out = core.zeros_like(x)
  -- Set where FSDP shards a pipeline's experts (parallel/pipeline/pipeline_fsdp.lua).
  local every = rawget(self, "runs_every_expert") == true
  for e, expert in ipairs(self.experts) do
    local picked = chosen:eq(e)
    local tokens = picked:any(-1):nonzero()
    if every or tokens:size(1) > 0 then
      tokens = tokens:view(-1)
      local weight = (top * picked:float()):sum(-1):index_select(1, tokens):unsqueeze(-1)
      out:index_add_(1, tokens, (expert(x:index_select(1, tokens)) * weight):to(out.dtype))
    end
  end
  return out:view(B, T, H)
end

-- transformers' load_balancing_loss_func: over every layer's tokens (those
-- the mask keeps), the share of top-k picks each expert got times its mean
-- router probability, summed and scaled by the number of experts (1 when
-- the routing is even). Gradients reach the gates through the
-- probabilities only, as there.
function mixtral.load_balancing_loss(gate_logits, experts, top_k, attention_mask)
  local picks, probs, rows = nil, nil, 0
  local mask = attention_mask and attention_mask:reshape(-1):float()
  local numbers = core.arange(1, experts + 1, { device = gate_logits[1].device })
  for _, logits in ipairs(gate_logits) do
    local weights = F.softmax(logits, -1)
    local _, chosen = weights:topk(top_k, -1)  -- 1-based expert numbers
    local picked = chosen:unsqueeze(-1):eq(numbers):float():sum(2)  -- [rows, experts]
    local layer_picks, layer_probs
    if mask then
      layer_picks, layer_probs = (picked * mask:unsqueeze(-1)):sum(1), (weights:float() * mask:unsqueeze(-1)):sum(1)
      rows = rows + mask:sum()
    else
      layer_picks, layer_probs = picked:sum(1), weights:float():sum(1)
      rows = rows + weights:size(1)
    end
    picks = picks and picks + layer_picks or layer_picks
    probs = probs and probs + layer_probs or layer_probs
  end
  return ((picks / rows) * (probs / rows)):sum() * experts
end

function mixtral.settings(cfg)
  return mistral.settings(cfg, 1e6)
end

mixtral.MixtralForCausalLM = llama.causal_lm_class("MixtralForCausalLM", mixtral.settings, function(cfg, s)
  return function() return "block_sparse_moe", SparseMoeBlock(s, cfg) end
end)

-- How accel.parallel.tensor_parallel splits it: Llama's attention, and
-- each expert split as an MLP (w1 and w3 column-, w2 row-parallel, as
-- transformers' Mixtral plan) behind the router (gate), which every rank
-- keeps whole and runs alike. No sp_plan: the experts see the tokens each
-- picks, not a sequence to split.
mixtral.tp_plan = {
  ["layers.*.block_sparse_moe.experts.*.w1"] = "colwise",
  ["layers.*.block_sparse_moe.experts.*.w3"] = "colwise",
  ["layers.*.block_sparse_moe.experts.*.w2"] = "rowwise",
}
for pattern, kind in pairs(llama.tp_plan) do
  if not pattern:find("%.mlp%.") then mixtral.tp_plan[pattern] = kind end
end
mixtral.MixtralForCausalLM.tp_plan = mixtral.tp_plan

local causal_lm_forward = mixtral.MixtralForCausalLM.forward

function mixtral.MixtralForCausalLM:forward(inputs)
  local cfg = self.config
  if not config.get(cfg, "output_router_logits", "boolean", false) then return causal_lm_forward(self, inputs) end
  local blocks, sink = {}, {}
  for _, layer in ipairs(self.model.layers) do
    blocks[#blocks + 1] = layer.block_sparse_moe
    rawset(layer.block_sparse_moe, "router_sink", sink)
  end
  local ok, out = pcall(causal_lm_forward, self, inputs)
  for _, block in ipairs(blocks) do rawset(block, "router_sink", nil) end
  if not ok then error(out, 0) end
  -- With a cache the mask covers the past too; the logits are the new tokens'.
  local mask = inputs.attention_mask
  if mask ~= nil then
    local new_tokens = sink[1]:size(1) / mask:size(1)
    mask = mask:narrow(2, mask:size(2) - new_tokens + 1, new_tokens)
  end
  out.router_logits = sink
  out.aux_loss = mixtral.load_balancing_loss(sink, blocks[1].gate.weight:size(1), blocks[1].top_k, mask)
  if out.loss ~= nil then
    out.loss = out.loss + config.get(cfg, "router_aux_loss_coef", "number", 0.001) * out.aux_loss:to(out.loss.device)
  end
  return out
end

return mixtral
