-- accel.peft.LoraConfig{...}: what get_peft_model adds, in PEFT's LoraConfig
-- names and defaults:
--   r = 8                   the adapters' rank
--   lora_alpha = 8          scaling = lora_alpha / r (lora_alpha / sqrt(r) with use_rslora)
--   lora_dropout = 0        dropout on the adapters' input while training
--   target_modules          a list of module names ({"q_proj", "v_proj"}: a module matches when its
--                           full name is the name or ends with "." .. name), a Python regex on the
--                           full name (re.fullmatch), or "all-linear"; absent: PEFT's
--                           default for the model's model_type (q_proj and v_proj for Llama's family)
--   bias = "none"           "all": every bias trains too; "lora_only": the biases of the adapted layers
--   modules_to_save         names of modules trained whole and saved with the adapter (a module
--                           matches when its full name ends with the name, as PEFT matches them)
--   init_lora_weights = true    true: lora_A as nn.Linear (kaiming_uniform, a = sqrt(5)), lora_B
--                               zeros; "gaussian": lora_A N(0, 1/r^2); false: both random (tests)
--   use_rslora = false
--   task_type, base_model_name_or_path   recorded in adapter_config.json for PEFT
local args = require("accel.util.args")

local LoraConfig = {}
LoraConfig.__index = LoraConfig

local where = "accel.peft.LoraConfig"

-- PEFT's TaskType values: PEFT picks the PeftModel class by it.
local task_types = {
  SEQ_CLS = true, SEQ_2_SEQ_LM = true, CAUSAL_LM = true, TOKEN_CLS = true, QUESTION_ANS = true,
  FEATURE_EXTRACTION = true,
}

local biases = { none = true, all = true, lora_only = true }

local function fail(key, message)
  args.error(string.format("%s: %s %s", where, key, message))
end

local function names_list(key, value)
  local n = 0
  for _ in pairs(value) do n = n + 1 end
  if n == 0 or n ~= #value then fail(key, "must be a non-empty list of module names") end
  for i, name in ipairs(value) do
    if type(name) ~= "string" or name == "" then
      fail(string.format("%s[%d]", key, i), "must be a module name (a non-empty string), got " .. tostring(name))
    end
  end
end

local function new(_, options)
  local o = args.options(where, options, {
    r = 8, lora_alpha = 8, lora_dropout = 0, target_modules = args.NONE, bias = "none",
    modules_to_save = args.NONE, init_lora_weights = true, use_rslora = false, task_type = args.NONE,
    base_model_name_or_path = args.NONE,
  }, {
    r = "number", lora_alpha = "number", lora_dropout = "number", target_modules = "table|string",
    bias = "string", modules_to_save = "table", init_lora_weights = "boolean|string", use_rslora = "boolean",
    task_type = "string", base_model_name_or_path = "string",
  })
  if o.r < 1 or o.r % 1 ~= 0 then fail("r", "must be a positive integer, got " .. tostring(o.r)) end
  if o.lora_alpha ~= o.lora_alpha then fail("lora_alpha", "must be a number, got nan") end
  if o.lora_dropout < 0 or o.lora_dropout >= 1 then
    fail("lora_dropout", "must be in [0, 1), got " .. tostring(o.lora_dropout))
  end
  if type(o.target_modules) == "table" then
    names_list("target_modules", o.target_modules)
  elseif o.target_modules == "" then
    fail("target_modules", "must be a list of module names or a pattern, got an empty string")
  end
  if not biases[o.bias] then
    fail("bias", "must be 'none', 'all' or 'lora_only', got '" .. o.bias .. "'")
  end
  if o.modules_to_save then names_list("modules_to_save", o.modules_to_save) end
  if o.init_lora_weights ~= true and o.init_lora_weights ~= false and o.init_lora_weights ~= "gaussian" then
    fail("init_lora_weights", "must be true, false or 'gaussian' (accel.peft has no '" .. o.init_lora_weights
         .. "' initialisation)")
  end
  if o.task_type and not task_types[o.task_type] then
    local known = {}
    for k in pairs(task_types) do known[#known + 1] = k end
    table.sort(known)
    fail("task_type", "must be one of PEFT's task types (" .. table.concat(known, ", ") .. "), got '"
         .. o.task_type .. "'")
  end
  return setmetatable(o, LoraConfig)
end

setmetatable(LoraConfig, { __call = new })

function LoraConfig.is(v)
  return getmetatable(v) == LoraConfig
end

-- The factor the adapters' output is multiplied by.
function LoraConfig:scaling()
  return self.use_rslora and self.lora_alpha / math.sqrt(self.r) or self.lora_alpha / self.r
end

return LoraConfig
