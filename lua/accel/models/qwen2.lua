-- The Qwen2 architecture (Qwen2ForCausalLM): the Llama decoder with biases
-- on the q, k and v projections (not o), and, with use_sliding_window, a
-- sliding window on the layers from max_window_layers on (as transformers'
-- layer_types). transformers' parameter names.
local config = require("accel.models.config")
local llama = require("accel.models.llama")

local qwen2 = {}

-- transformers' Qwen2Config defaults (sizes required, as llama.lua says).
qwen2.defaults = {
  hidden_act = "silu", max_position_embeddings = 32768, initializer_range = 0.02, rms_norm_eps = 1e-6,
  tie_word_embeddings = false, use_sliding_window = false, sliding_window = 4096,
  max_window_layers = 28, attention_dropout = 0,
}

function qwen2.settings(cfg)
  local s = llama.settings(cfg)
  s.qkv_bias, s.o_bias = true, false
  if config.get(cfg, "use_sliding_window", "boolean", false) then
    local window = config.optional(cfg, "sliding_window", "number")
    local first = config.get(cfg, "max_window_layers", "number", s.layers)
    s.window = function(layer) return layer >= first and window or nil end
  end
  return s
end

qwen2.Qwen2ForCausalLM = llama.causal_lm_class("Qwen2ForCausalLM", qwen2.settings)
-- The Llama decoder's layers and names: Llama's plans (llama.lua) split it.
qwen2.Qwen2ForCausalLM.tp_plan = llama.tp_plan
qwen2.Qwen2ForCausalLM.sp_plan = llama.sp_plan

return qwen2
