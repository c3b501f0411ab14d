-- PEFT's LoraModel (the tuner, a PeftModel's base_model): it holds the
-- model as its field `model`, so the PeftModel's state_dict names are
-- PEFT's ("base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight").
-- Made, it freezes the model (freeze.lua), wraps every targeted nn.Linear
-- in a LoRA layer and every module of modules_to_save in a wrapper holding
-- a trainable copy (targets.lua says which). unload takes them out again.
local nn = require("accel.nn")
local LoraLayer = require("accel.peft.lora_layer")
local ModulesToSaveWrapper = require("accel.peft.modules_to_save")
local targets = require("accel.peft.targets")
local freeze = require("accel.peft.freeze")

local LoraModel = nn.Module:extend("LoraModel")

-- config: a LoraConfig; where: the calling function, for errors.
function LoraModel:init(model, config, where)
  local spec, matches = targets.resolve(model, config, where)
  local saved = targets.saved(model, config, where)
  local adapted = targets.adapted(model, config, spec, matches, where)
  -- The copies are made before freezing, from the trainable originals.
  local wrappers, inside_saved = {}, {}
  for i, s in ipairs(saved) do
    wrappers[i] = ModulesToSaveWrapper(s.module)
    for _, m in ipairs(s.module:modules()) do inside_saved[m] = true end
  end
  local adapted_linear = {}
  for _, s in ipairs(adapted) do adapted_linear[s.module] = true end
  local frozen = {}
  freeze(model, function(m, key)
    if key ~= "bias" or inside_saved[m] then return false end
    return config.bias == "all" or (config.bias == "lora_only" and adapted_linear[m] == true)
  end, frozen)
  for _, s in ipairs(adapted) do rawset(s.parent, s.key, LoraLayer(s.module, config)) end
  for i, s in ipairs(saved) do rawset(s.parent, s.key, wrappers[i]) end
  self.model = model
  -- The config as it applies to this model: target_modules resolved (PEFT's
  -- default for the model_type, or "all-linear"'s layers), as PEFT records it.
  local resolved = setmetatable({}, getmetatable(config))
  for k, v in pairs(config) do resolved[k] = v end
  resolved.target_modules = spec
  rawset(self, "peft_config", resolved)
  rawset(self, "frozen", frozen)  -- {module, key} of every frozen parameter
end

function LoraModel:forward(...)
  return self.model(...)
end

function LoraModel.is_adapter(m)
  local cls = getmetatable(m)
  return cls == LoraLayer or cls == ModulesToSaveWrapper
end

-- The LoRA layers and modules_to_save wrappers under `root`, as
-- targets.submodules entries (paths relative to root).
function LoraModel.adapters(root)
  local out = {}
  for _, s in ipairs(targets.submodules(root)) do
    if LoraModel.is_adapter(s.module) then out[#out + 1] = s end
  end
  return out
end

-- Puts back what the adapters wrap and returns the model: each LoRA
-- layer's base layer, its update added to the weight when `merge` (PEFT's
-- merge_and_unload; unmerged, unload), and each wrapper's active module
-- (the trained copy, unless adapters are disabled).
function LoraModel:unload(merge)
  for _, s in ipairs(LoraModel.adapters(self.model)) do
    local m = s.module
    local back
    if getmetatable(m) == LoraLayer then
      back = merge and m:merge() or m.base_layer
    else
      back = m:active()
    end
    rawset(s.parent, s.key, back)
  end
  return self.model
end

return LoraModel
