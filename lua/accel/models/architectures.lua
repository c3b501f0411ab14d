-- model_type -> the architecture that builds it: the module and the class.
-- What transformers keeps on the class stays on it here: the layers device
-- maps never split (_no_split_modules), the base model's prefix
-- (base_model_prefix) and the parallel plans (tp_plan, sp_plan, cp_plan).
local args = require("accel.util.args")
local config = require("accel.models.config")

local architectures = {}

local registry = {
  llama = { module = "accel.models.llama", class = "LlamaForCausalLM" },
  mistral = { module = "accel.models.mistral", class = "MistralForCausalLM" },
  qwen2 = { module = "accel.models.qwen2", class = "Qwen2ForCausalLM" },
  mixtral = { module = "accel.models.mixtral", class = "MixtralForCausalLM" },
  gpt2 = { module = "accel.models.gpt2", class = "GPT2LMHeadModel" },
  bert = { module = "accel.models.bert", class = "BertModel" },
}

-- The class of cfg's model_type, its config filled with the family's
-- defaults; an unknown model_type is an error naming the config's source.
function architectures.of(cfg)
  local model_type = cfg.model_type
  local a = registry[model_type]
  if not a then
    local known = {}
    for k in pairs(registry) do known[#known + 1] = k end
    table.sort(known)
    args.error(string.format("%s: %s (accel.models knows: %s)", config.source(cfg),
                             model_type == nil and "no 'model_type' key" or
                             string.format("model_type '%s' is not an architecture accel.models has", tostring(model_type)),
                             table.concat(known, ", ")))
  end
  local family = require(a.module)
  config.fill(cfg, family.defaults)
  local cls = family[a.class]
  cls.model_type = model_type
  return cls
end

return architectures
