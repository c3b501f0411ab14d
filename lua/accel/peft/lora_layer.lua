-- A LoRA layer around an nn.Linear, laid out as PEFT's lora.Linear so its
-- state_dict names are PEFT's:
--   base_layer.weight (.bias)     the wrapped layer, frozen
--   lora_dropout.default          nn.Dropout(lora_dropout), or nn.Identity when 0
--   lora_A.default.weight         (r, in_features)
--   lora_B.default.weight         (out_features, r)
-- forward(x) = base_layer(x) + lora_B(lora_A(dropout(x))) * scaling, in
-- that order of operations, as PEFT computes it. The adapters live on the
-- base weight's device; their dtype is the base's, but float32 for a
-- bfloat16 or float16 base (PEFT's autocast_adapter_dtype): the input is
-- cast to theirs and the sum back to the base output's dtype.
local core = require("accel.core")
local nn = require("accel.nn")
local forward_attributes = require("accel.peft.forward_attributes")

local LoraLayer = nn.Module:extend("LoraLinear")

local half = { bfloat16 = true, float16 = true }

-- base: the nn.Linear; config: the LoraConfig.
function LoraLayer:init(base, config)
  self.base_layer = base
  local r = config.r
  self.lora_dropout = nn.ModuleDict({ default = config.lora_dropout > 0 and nn.Dropout(config.lora_dropout)
                                                or nn.Identity() })
  self.lora_A = nn.ModuleDict({ default = nn.Linear(base.in_features, r, false) })
  self.lora_B = nn.ModuleDict({ default = nn.Linear(r, base.out_features, false) })
  local A, B = self.lora_A.default, self.lora_B.default
  -- init_lora_weights = false keeps nn.Linear's U(-1/sqrt(fan_in), 1/sqrt(fan_in)) on both, as PEFT does.
  if config.init_lora_weights ~= false then
    core.no_grad(function()
      if config.init_lora_weights == "gaussian" then
        nn.init.normal_(A.weight, 0, 1 / r)
      else
        nn.init.kaiming_uniform_(A.weight, { a = math.sqrt(5) })
      end
      nn.init.zeros_(B.weight)
    end)
  end
  local weight = base.weight
  -- A 4-bit base (Linear4bit, uint8 codes) gets float32 adapters, as PEFT's
  -- adapters on bitsandbytes layers.
  local dtype = (half[weight.dtype] or not weight:is_floating_point()) and "float32" or weight.dtype
  for _, m in ipairs({ A, B }) do
    if m.weight.dtype ~= dtype then m:to(dtype) end
    -- A base on the meta device (built under accel.init_empty_weights) gets its values, and so its
    -- adapters theirs, from the main process when prepared; the adapters stay where they were made.
    if m.weight.device ~= weight.device and weight.device ~= "meta" then m:to(weight.device) end
  end
  rawset(self, "scaling", config:scaling())
  rawset(self, "disable_adapters", false)  -- disable_adapter(fn) sets it while fn runs
end

function LoraLayer:forward(x)
  local result = self.base_layer(x)
  if self.disable_adapters then return result end
  local A = self.lora_A.default
  local h = x.dtype == A.weight.dtype and x or x:to(A.weight.dtype)
  local out = result + self.lora_B.default(A(self.lora_dropout.default(h))) * self.scaling
  return out.dtype == result.dtype and out or out:to(result.dtype)
end

-- lora_B @ lora_A * scaling, the update merge_and_unload adds to the base weight.
function LoraLayer:delta_weight()
  return self.lora_B.default.weight:matmul(self.lora_A.default.weight) * self.scaling
end

-- Adds the update into the base weight and returns the base layer (which
-- then computes what this layer computed).
function LoraLayer:merge()
  if not self.base_layer.weight:is_floating_point() then
    require("accel.util.args").error("merge_and_unload: " .. tostring(self.base_layer) .. " holds 4-bit codes; load the "
                                .. "base model unquantized and merge the adapters into it")
  end
  core.no_grad(function() self.base_layer.weight:add_(self:delta_weight()) end)
  return self.base_layer
end

function LoraLayer:__tostring()
  return string.format("LoraLinear(%s, r %d, scaling %g)", tostring(self.base_layer),
                       self.lora_A.default.out_features, self.scaling)
end

forward_attributes(LoraLayer, function(self) return rawget(self, "base_layer") end)

return LoraLayer
