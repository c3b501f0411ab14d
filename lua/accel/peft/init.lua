-- accel.peft: LoRA adapters as Hugging Face PEFT makes them, saves them
-- and loads them (docs/api/finetuning.md).
--   local config = accel.peft.LoraConfig{r = 8, lora_alpha = 16, target_modules = {"q_proj", "v_proj"}}
--   local model = accel.peft.get_peft_model(base, config)     -- base frozen, adapters trainable
--   local opt = accel.optim.AdamW(model:parameters())         -- the adapters alone
--   model:save_pretrained(dir)                                -- PEFT's adapter_config.json, adapter_model.safetensors
--   local tuned = accel.peft.from_pretrained(base, dir)       -- a PEFT adapter folder
local Module = require("accel.nn.module")
local args = require("accel.util.args")
local LoraConfig = require("accel.peft.lora_config")
local PeftModel = require("accel.peft.peft_model")
local LoraModel = require("accel.peft.lora_model")
local adapter_config = require("accel.peft.adapter_config")
local adapter_weights = require("accel.peft.adapter_weights")
local freeze = require("accel.peft.freeze")

local peft = {}

peft.LoraConfig = LoraConfig
peft.PeftModel = PeftModel
peft.prepare_model_for_kbit_training = require("accel.peft.prepare_model_for_kbit_training")

local function check_model(where, model)
  if not Module.is_module(model) then
    args.error(string.format("%s: expected a module (an nn.Module or an accel.models model), got a %s", where,
                             type(model)))
  end
  if getmetatable(model) == PeftModel or #LoraModel.adapters(model) > 0 then
    args.error(where .. ": the model already has adapters (accel.peft adds one adapter, 'default', to a model)")
  end
end

-- Freezes every parameter of `model`, wraps its target modules with LoRA
-- layers (and its modules_to_save with trainable copies) in place, and
-- returns the PeftModel around it.
function peft.get_peft_model(model, config)
  local where = "accel.peft.get_peft_model"
  check_model(where, model)
  if not LoraConfig.is(config) then
    args.error(where .. ": the config must be made by accel.peft.LoraConfig{...}, got a " .. type(config))
  end
  return PeftModel(model, config, where)
end

-- `model` with the adapter of a PEFT folder (adapter_config.json and
-- adapter_model.safetensors, or PEFT's adapter_model.bin). As PEFT's
-- PeftModel.from_pretrained: unless is_trainable, the adapters are frozen
-- too and the model is put in eval mode.
function peft.from_pretrained(model, dir, options)
  local where = "accel.peft.from_pretrained"
  local o = args.options(where, options, { is_trainable = false }, { is_trainable = "boolean" })
  check_model(where, model)
  if type(dir) ~= "string" or not require("accel.core").formats.is_folder(dir) then
    args.error(string.format("%s: '%s' is not a folder", where, tostring(dir)))
  end
  local config = adapter_config.read(dir)
  local path
  for _, name in ipairs({ adapter_weights.FILE, "adapter_model.bin" }) do
    if require("accel.core").formats.file_kind(dir .. "/" .. name) ~= "missing" then
      path = dir .. "/" .. name
      break
    end
  end
  if not path then
    args.error(string.format("%s: %s has neither %s nor adapter_model.bin", where, dir, adapter_weights.FILE))
  end
  adapter_weights.check_rank(config, path, dir .. "/" .. adapter_config.FILE)
  local peft_model = PeftModel(model, config, where)
  adapter_weights.load(peft_model, path)
  if not o.is_trainable then
    freeze(peft_model, function() return false end, peft_model.base_model.frozen)
    peft_model:eval()
  end
  return peft_model
end

return peft
