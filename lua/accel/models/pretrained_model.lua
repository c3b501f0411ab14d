-- The base class of accel.models' architectures, as transformers'
-- PreTrainedModel: a module that knows its config (self.config), writes
-- itself as a Hugging Face folder, initialises fresh weights as
-- transformers does, and generates (generation.lua).
local core = require("accel.core")
local ck = core.formats
local nn = require("accel.nn")
local args = require("accel.util.args")
local config = require("accel.models.config")
local named_tensors = require("accel.util.named_tensors")

local PreTrainedModel = nn.Module:extend("PreTrainedModel")

-- model:save_pretrained(dir, {is_main_process = true, safe_serialization = true,
-- max_shard_size = "5GB"}): config.json (architectures and model_type set,
-- nulls kept) and the weights under transformers' names, tied weights once
-- (model.safetensors, or shards with model.safetensors.index.json), and
-- generation_config.json when the model was loaded with one. On many
-- processes, only the one given is_main_process = true writes.
function PreTrainedModel:save_pretrained(dir, options)
  local where = self.__name .. ":save_pretrained"
  local o = args.options(where, options, { is_main_process = true, safe_serialization = true, max_shard_size = "5GB" },
                         { is_main_process = "boolean", safe_serialization = "boolean",
                           max_shard_size = "string|number" })
  if type(dir) ~= "string" then args.error(where .. ": the folder must be a string, got a " .. type(dir)) end
  if not o.is_main_process then return end
  local state = named_tensors(self)
  for _, pair in ipairs(state) do
    if pair[2].device == "meta" then
      args.error(string.format("%s: '%s' is on the meta device (never loaded); load the weights before saving",
                               where, pair[1]))
    end
  end
  local files = ck.save_weights(dir, state, { safe_serialization = o.safe_serialization,
                                               max_shard_size = o.max_shard_size })
  local cfg = self.config
  cfg.architectures = { self.__name }
  cfg.model_type = self.model_type
  local first = state[1] and state[1][2]
  -- transformers 5 names it dtype, earlier versions torch_dtype.
  if first and first:is_floating_point() then cfg[cfg.dtype and "dtype" or "torch_dtype"] = first.dtype end
  ck.write_text(dir .. "/config.json", config.to_json(cfg))
  files[#files + 1] = "config.json"
  if self.generation_config then
    ck.write_text(dir .. "/generation_config.json", config.to_json(self.generation_config))
    files[#files + 1] = "generation_config.json"
  end
  return files
end

-- Fresh weights as transformers' _init_weights: linear weights and
-- embeddings N(0, std^2) (a padding row zero), biases zero; norms keep
-- their ones and zeros.
function PreTrainedModel:init_weights(std)
  core.no_grad(function()
    for _, m in ipairs(self:modules()) do
      if m.__name == "Linear" then
        nn.init.normal_(m.weight, 0, std)
        if m.bias then m.bias:zero_() end
      elseif m.__name == "Embedding" then
        nn.init.normal_(m.weight, 0, std)
        if m.padding_idx then m.weight[m.padding_idx] = 0 end
      end
    end
  end)
  return self
end

function PreTrainedModel:generate(input_ids, options)
  return require("accel.models.generation").generate(self, input_ids, options)
end

return PreTrainedModel
