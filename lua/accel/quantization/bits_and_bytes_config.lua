-- accel.BitsAndBytesConfig{...}: how from_pretrained quantizes a model, in
-- transformers' names and with its defaults:
--   load_in_4bit = false            the nn.Linear layers become Linear4bit
--   load_in_8bit = false            (not built: an error says so)
--   bnb_4bit_quant_type = "fp4"     or "nf4" (NormalFloat, QLoRA's)
--   bnb_4bit_use_double_quant = false   the blocks' absmax coded in 8 bits too
--   bnb_4bit_compute_dtype = float32    the dtype the layers compute in
--   bnb_4bit_quant_storage = uint8      the dtype the packed codes are stored as
--   llm_int8_skip_modules = nil     names of modules left unquantized; nil:
--                                   the output layer (lm_head), as transformers
--   llm_int8_threshold = 6.0, llm_int8_has_fp16_weight = false,
--   llm_int8_enable_fp32_cpu_offload = false   (8-bit settings, kept for the folder)
-- config:to_dict() is the quantization_config a saved folder's config.json
-- carries, as transformers writes it; BitsAndBytesConfig.from_dict reads one.
local args = require("accel.util.args")

local BitsAndBytesConfig = {}
BitsAndBytesConfig.__index = BitsAndBytesConfig

local where = "accel.BitsAndBytesConfig"

local defaults = {
  load_in_4bit = false, load_in_8bit = false, bnb_4bit_quant_type = "fp4", bnb_4bit_use_double_quant = false,
  bnb_4bit_compute_dtype = "float32", bnb_4bit_quant_storage = "uint8", llm_int8_skip_modules = args.NONE,
  llm_int8_threshold = 6.0, llm_int8_has_fp16_weight = false, llm_int8_enable_fp32_cpu_offload = false,
}
local types = {
  load_in_4bit = "boolean", load_in_8bit = "boolean", bnb_4bit_quant_type = "string",
  bnb_4bit_use_double_quant = "boolean", bnb_4bit_compute_dtype = "string", bnb_4bit_quant_storage = "string",
  llm_int8_skip_modules = "table", llm_int8_threshold = "number", llm_int8_has_fp16_weight = "boolean",
  llm_int8_enable_fp32_cpu_offload = "boolean",
}
local float_dtypes = { float32 = true, bfloat16 = true, float16 = true }
local storage_dtypes = { uint8 = true, int8 = true, float32 = true, bfloat16 = true, float16 = true, int32 = true }

local function new(options)
  local o = args.options(where, options, defaults, types)
  if o.load_in_4bit and o.load_in_8bit then
    args.error(where .. ": load_in_4bit and load_in_8bit are both true; choose one")
  end
  if o.load_in_8bit then
    args.error(where .. ": load_in_8bit is not built in accel (LLM.int8()); use load_in_4bit")
  end
  if o.bnb_4bit_quant_type ~= "nf4" and o.bnb_4bit_quant_type ~= "fp4" then
    args.error(string.format("%s: bnb_4bit_quant_type must be \"nf4\" or \"fp4\", got \"%s\"", where,
                             o.bnb_4bit_quant_type))
  end
  if not float_dtypes[o.bnb_4bit_compute_dtype] then
    args.error(string.format("%s: bnb_4bit_compute_dtype must be accel.float32, bfloat16 or float16, got %s", where,
                             o.bnb_4bit_compute_dtype))
  end
  if not storage_dtypes[o.bnb_4bit_quant_storage] then
    args.error(string.format("%s: bnb_4bit_quant_storage must be one of uint8, int8, int32, float16, bfloat16, "
                             .. "float32, got %s", where, o.bnb_4bit_quant_storage))
  end
  for i, name in ipairs(o.llm_int8_skip_modules or {}) do
    if type(name) ~= "string" then
      args.error(string.format("%s: llm_int8_skip_modules[%d] must be a module name, got a %s", where, i, type(name)))
    end
  end
  return setmetatable(o, BitsAndBytesConfig)
end

setmetatable(BitsAndBytesConfig, { __call = function(_, options) return new(options) end })

function BitsAndBytesConfig.is_config(v)
  return getmetatable(v) == BitsAndBytesConfig
end

-- The quantization_config of config.json, as transformers writes it.
function BitsAndBytesConfig:to_dict()
  local out = { quant_method = "bitsandbytes", _load_in_4bit = self.load_in_4bit, _load_in_8bit = self.load_in_8bit }
  for key in pairs(defaults) do out[key] = self[key] end
  return out
end

-- A config.json's quantization_config (`source` names it in errors): a
-- bitsandbytes 4-bit one, its unknown keys ignored as transformers ignores them.
function BitsAndBytesConfig.from_dict(t, source)
  if type(t) ~= "table" or t.quant_method ~= "bitsandbytes" then
    args.error(string.format("%s: quantization_config has quant_method '%s'; accel reads bitsandbytes' only", source,
                             type(t) == "table" and tostring(t.quant_method) or "?"))
  end
  local given = {}
  for key in pairs(defaults) do
    local v = t[key]
    if v ~= nil and type(v) == types[key] then given[key] = v end
  end
  if given.load_in_4bit == nil and t._load_in_4bit ~= nil then given.load_in_4bit = t._load_in_4bit end
  if not given.load_in_4bit then
    args.error(string.format("%s: quantization_config is not a 4-bit one (load_in_4bit is not true); accel reads "
                             .. "bitsandbytes' 4-bit folders only", source))
  end
  return new(given)
end

return BitsAndBytesConfig
