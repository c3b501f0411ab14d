-- What accel.peft.get_peft_model returns, as PEFT's PeftModel: the model
-- with LoRA adapters (its field base_model, a LoraModel, holds it as
-- base_model.model), called and generating as the model does. Keys its
-- class lacks are the model's (peft_model.config, bound methods:
-- forward_attributes.lua).
--   peft_model{input_ids = ..., labels = ...}, peft_model:generate(ids, {...})
--   peft_model:print_trainable_parameters()
--   peft_model:get_nb_trainable_parameters() -> trainable, all
--   peft_model:save_pretrained(dir, {is_main_process = true, state_dict})
--   peft_model:merge_and_unload() / unload() -> the model without adapters
--   peft_model:disable_adapter(fn) -> fn's results, computed without adapters
--   peft_model:get_base_model() -> the model (adapters in place)
local core = require("accel.core")
local nn = require("accel.nn")
local args = require("accel.util.args")
local models_config = require("accel.models.config")
local generation = require("accel.models.generation")
local LoraModel = require("accel.peft.lora_model")
local adapter_config = require("accel.peft.adapter_config")
local adapter_weights = require("accel.peft.adapter_weights")
local forward_attributes = require("accel.peft.forward_attributes")

local PeftModel = nn.Module:extend("PeftModel")

function PeftModel:init(model, config, where)
  self.base_model = LoraModel(model, config, where)
  rawset(self, "peft_config", self.base_model.peft_config)
end

function PeftModel:forward(...)
  return self.base_model(...)
end

function PeftModel:get_base_model()
  return self.base_model.model
end

-- Through this model's forward, so that what prepare put around it
-- (autocast) applies while generating too.
function PeftModel:generate(input_ids, options)
  local model = self:get_base_model()
  if type(model.generate) ~= "function" then
    args.error(string.format("PeftModel:generate: the model (%s) does not generate; accel.models' causal "
                             .. "language models do", model.__name))
  end
  return generation.generate(self, input_ids, options)
end

-- Trainable numbers of elements, and all: the parameters and the frozen
-- ones (buffers now, freeze.lua), each tensor once, as PEFT counts its
-- named_parameters().
function PeftModel:get_nb_trainable_parameters()
  local trainable, all, seen = 0, 0, {}
  for _, p in ipairs(self:parameters()) do
    seen[p] = true
    trainable = trainable + p:numel()
  end
  all = trainable
  for _, pair in ipairs(self.base_model.frozen) do
    local t = rawget(pair[1], pair[2])
    if t ~= nil and not seen[t] then
      seen[t] = true
      all = all + t:numel()
    end
  end
  return trainable, all
end

local function with_commas(n)
  local s = string.format("%d", n)
  local out = s:reverse():gsub("(%d%d%d)", "%1,"):reverse()
  return (out:gsub("^,", ""))
end

-- PEFT's line: "trainable params: 9,984 || all params: 100,416 || trainable%: 9.9426".
function PeftModel:print_trainable_parameters()
  local trainable, all = self:get_nb_trainable_parameters()
  print(string.format("trainable params: %s || all params: %s || trainable%%: %.4f", with_commas(trainable),
                      with_commas(all), all > 0 and 100 * trainable / all or 0))
end

-- The model's folder when it came from accel.models.from_pretrained, as
-- PEFT records transformers' name_or_path.
local function base_model_name(model)
  local cfg = model.config
  if type(cfg) ~= "table" then return nil end
  return models_config.source(cfg):match("^(.*)/config%.json$")
end

-- Writes dir/adapter_config.json and dir/adapter_model.safetensors, which
-- PEFT's PeftModel.from_pretrained reads. state_dict (names as this
-- model's state_dict gives them, e.g. from acc:get_state_dict(model) when
-- the parameters are sharded) supplies the values instead of the model.
-- On many processes, only the one given is_main_process = true writes.
function PeftModel:save_pretrained(dir, options)
  local where = "PeftModel:save_pretrained"
  local o = args.options(where, options, { is_main_process = true, state_dict = args.NONE },
                         { is_main_process = "boolean", state_dict = "table" })
  if type(dir) ~= "string" then args.error(where .. ": the folder must be a string, got a " .. type(dir)) end
  if not o.is_main_process then return end
  local state = o.state_dict or self:state_dict()
  local tensors = {}
  for _, pair in ipairs(adapter_weights.pairs(self)) do
    local t = state[pair[1]]
    if t == nil then args.error(string.format("%s: the state_dict given has no '%s'", where, pair[1])) end
    if t.device == "meta" then
      args.error(string.format("%s: '%s' is on the meta device (never loaded); load the weights before saving",
                               where, pair[1]))
    end
    -- Sharded at stage 3 a parameter holds nothing outside its forward (PEFT warns of the same).
    if t:numel() == 0 then
      args.error(string.format("%s: '%s' holds no elements on this rank: the parameters are sharded (zero_stage "
                               .. "3 or FULL_SHARD); pass state_dict = acc:get_state_dict(model), called on every "
                               .. "rank", where, pair[1]))
    end
    tensors[#tensors + 1] = { pair[2], t }
  end
  local ck = core.formats
  if not ck.is_folder(dir) then
    local existing = io.open(dir, "rb")
    if existing then
      existing:close()
      args.error(string.format("%s: '%s' exists and is not a folder", where, dir))
    end
    ck.make_empty_folder(dir)
  end
  ck.write_safetensors(dir .. "/" .. adapter_weights.FILE, tensors)
  ck.write_text(dir .. "/" .. adapter_config.FILE,
                adapter_config.encode(self.peft_config, self.peft_config.base_model_name_or_path
                                                        or base_model_name(self:get_base_model())))
  return { adapter_weights.FILE, adapter_config.FILE }
end

-- The model with each LoRA update added into its base weight and the
-- trained copies of modules_to_save in place of the originals; the base
-- weights stay frozen (buffers), as PEFT leaves them requires_grad false.
function PeftModel:merge_and_unload()
  return self.base_model:unload(true)
end

-- The model as it was, adapters dropped unmerged.
function PeftModel:unload()
  return self.base_model:unload(false)
end

local function captured(ok, ...)
  return ok, { n = select("#", ...), ... }
end

-- Runs fn with every adapter off (LoRA layers compute their base layer
-- alone, modules_to_save wrappers run the original) and returns fn's
-- results; the adapters are back on when it returns or raises.
function PeftModel:disable_adapter(fn)
  if type(fn) ~= "function" then
    args.error("PeftModel:disable_adapter: expected a function to run without the adapters, got a " .. type(fn))
  end
  local before = {}
  for i, a in ipairs(LoraModel.adapters(self)) do
    before[i] = { a.module, rawget(a.module, "disable_adapters") }
    rawset(a.module, "disable_adapters", true)
  end
  local ok, results = captured(pcall(fn))
  for _, b in ipairs(before) do rawset(b[1], "disable_adapters", b[2]) end
  if not ok then error(results[1], 0) end
  return unpack(results, 1, results.n)
end

-- As PEFT's: gradient checkpointing is the wrapped model's, enabled and
-- disabled on it, so is_gradient_checkpointing (read through the wrapper)
-- says the same whichever of the two was asked.
function PeftModel:gradient_checkpointing_enable(options)
  self:get_base_model():gradient_checkpointing_enable(options)
  return self
end

function PeftModel:gradient_checkpointing_disable()
  self:get_base_model():gradient_checkpointing_disable()
  return self
end

forward_attributes(PeftModel, function(self)
  local base = rawget(self, "base_model")
  return base and rawget(base, "model")
end)

return PeftModel
