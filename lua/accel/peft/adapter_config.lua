-- adapter_config.json, as PEFT writes and reads it.
--   adapter_config.encode(config, base_model_name_or_path) -> JSON text
--   adapter_config.read(dir) -> a LoraConfig
-- Written: the LoraConfig's keys and PEFT's defaults for the LoRA options
-- accel.peft does not have (use_dora false, rank_pattern {}, ...), with
-- inference_mode true, as PEFT's save_pretrained writes it. Read: the keys
-- a LoraConfig takes; a PEFT option accel.peft does not implement is
-- refused, naming the file and the key, when it holds anything but its
-- default (a DoRA adapter, per-layer ranks, GPT-2's fan_in_fan_out ...),
-- since loading it without would silently compute something else. Keys
-- that only describe (peft_version, revision, ...) are ignored, as are
-- options PEFT adds later while they hold an empty value.
local core = require("accel.core")
local args = require("accel.util.args")
local LoraConfig = require("accel.peft.lora_config")

local json = core.json
local null = json.null

local adapter_config = {}

adapter_config.FILE = "adapter_config.json"

local function or_null(v)
  if v == nil then return null end
  return v
end

function adapter_config.encode(config, base_model_name_or_path)
  return json.encode({
    peft_type = "LORA",
    task_type = or_null(config.task_type),
    base_model_name_or_path = or_null(base_model_name_or_path),
    revision = null,
    r = config.r,
    lora_alpha = config.lora_alpha,
    lora_dropout = config.lora_dropout,
    target_modules = config.target_modules,
    bias = config.bias,
    modules_to_save = or_null(config.modules_to_save),
    init_lora_weights = config.init_lora_weights,
    use_rslora = config.use_rslora,
    inference_mode = true,
    fan_in_fan_out = false,
    use_dora = false,
    lora_bias = false,
    rank_pattern = {},
    alpha_pattern = {},
    layers_to_transform = null,
    layers_pattern = null,
    exclude_modules = null,
  }, { lora_dropout = true })
end

-- The keys a LoraConfig takes, read as they are (null as absent).
local taken = {
  task_type = true, base_model_name_or_path = true, r = true, lora_alpha = true, lora_dropout = true,
  target_modules = true, bias = true, modules_to_save = true, init_lora_weights = true, use_rslora = true,
}

-- Keys that describe the file rather than the adapter.
local ignored = {
  peft_type = true, peft_version = true, revision = true, inference_mode = true, auto_mapping = true,
  megatron_core = true, qalora_group_size = true,
}

local function is_empty(v)
  return v == null or v == false or v == "" or (type(v) == "table" and next(v) == nil)
end

function adapter_config.read(dir)
  local path = dir .. "/" .. adapter_config.FILE
  if core.formats.file_kind(path) == "missing" then
    args.error(string.format("%s has no %s: not a PEFT adapter folder", dir, adapter_config.FILE))
  end
  local ok, t = pcall(json.read, path, 1024 * 1024)
  -- The reader's message names the file; the position is the caller's to add.
  if not ok then args.error((tostring(t):gsub("^[^\n]-:%d+: ", ""))) end
  if t.peft_type ~= "LORA" then
    args.error(string.format("%s: %s (accel.peft reads LoRA adapters, peft_type 'LORA')", path,
                             t.peft_type == nil and "no peft_type"
                               or ("peft_type '" .. tostring(t.peft_type) .. "' is not LORA")))
  end
  local options, keys = {}, {}
  for key in pairs(t) do keys[#keys + 1] = key end
  table.sort(keys)
  for _, key in ipairs(keys) do
    local v = t[key]
    if taken[key] then
      if v ~= null then options[key] = v end
    elseif not ignored[key] and not is_empty(v) then
      args.error(string.format("%s: '%s' is %s, a PEFT option accel.peft does not implement (it reads adapters "
                               .. "whose %s is empty or false)", path, key,
                               type(v) == "table" and "set" or ("'" .. tostring(v) .. "'"), key))
    end
  end
  local made, config = pcall(LoraConfig, options)
  if not made then
    args.error(path .. ": " .. tostring(config):gsub("^.-accel%.peft%.LoraConfig: ", ""))
  end
  return config
end

return adapter_config
