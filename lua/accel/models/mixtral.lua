-- The Mixtral architecture (MixtralForCausalLM): the Llama decoder (with
-- Mistral's optional sliding window) whose MLP is a sparse mixture of
-- experts. Each token's router (block_sparse_moe.gate) picks the top
-- num_experts_per_tok of num_local_experts by softmax probability, in
-- float32; their weights are renormalised to sum to one, and the token's
-- output is the weighted sum of those experts' SiLU-gated MLPs (w1 gate,
-- w3 up, w2 down). Names are the checkpoints' own
-- (model.layers.N.block_sparse_moe.experts.M.w1.weight), which
-- transformers also writes.
local core = require("accel.core")
local F = core.functional
local nn = require("accel.nn")
local args = require("accel.args")
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

function SparseMoeBlock:forward(h)
  local B, T, H = h:size(1), h:size(2), h:size(3)
  if self.training and self.jitter > 0 then
    h = h * core.empty_like(h):uniform_(1 - self.jitter, 1 + self.jitter)
  end
  local x = h:reshape(B * T, H)
  local probs = F.softmax(self.gate(x):float(), -1)
  local top, chosen = probs:topk(self.top_k, -1)  -- chosen: 1-based expert numbers
  top = top / top:sum(-1, true)
  local out = core.zeros_like(x)
  for e, expert in ipairs(self.experts) do
    local picked = chosen:eq(e)
    local tokens = picked:any(-1):nonzero()
    if tokens:size(1) > 0 then
      tokens = tokens:view(-1)
      local weight = (top * picked:float()):sum(-1):index_select(1, tokens):unsqueeze(-1)
      out:index_add_(1, tokens, (expert(x:index_select(1, tokens)) * weight):to(out.dtype))
    end
  end
  return out:view(B, T, H)
end

function mixtral.settings(cfg)
  if config.get(cfg, "output_router_logits", "boolean", false) then
    args.error(config.source(cfg) .. ": output_router_logits (the router's auxiliary loss) is not supported; "
               .. "set it to false")
  end
  return mistral.settings(cfg, 1e6)
end

mixtral.MixtralForCausalLM = llama.causal_lm_class("MixtralForCausalLM", mixtral.settings, function(cfg, s)
  return function() return "block_sparse_moe", SparseMoeBlock(s, cfg) end
end)

return mixtral
