-- The Mistral architecture (MistralForCausalLM): the Llama decoder whose
-- attention sees at most sliding_window positions back (every layer; null
-- for none), without biases. transformers' parameter names.
local config = require("accel.models.config")
local llama = require("accel.models.llama")

local mistral = {}

-- transformers' MistralConfig defaults (sizes required, as llama.lua says).
mistral.defaults = {
  hidden_act = "silu", max_position_embeddings = 4096 * 32, initializer_range = 0.02, rms_norm_eps = 1e-6,
  bos_token_id = 1, eos_token_id = 2, tie_word_embeddings = false, sliding_window = 4096,
  attention_dropout = 0,
}

function mistral.settings(cfg, rope_theta)
  local s = llama.settings(cfg, rope_theta)
  local window = config.optional(cfg, "sliding_window", "number")
  s.window = function() return window end
  return s
end

mistral.MistralForCausalLM = llama.causal_lm_class("MistralForCausalLM", mistral.settings)
-- The Llama decoder's layers and names: Llama's plans (llama.lua) split it.
mistral.MistralForCausalLM.tp_plan = llama.tp_plan
mistral.MistralForCausalLM.sp_plan = llama.sp_plan

return mistral
