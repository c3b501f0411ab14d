-- accel.quantization: bitsandbytes' 4-bit weights for the pretrained models.
--   accel.BitsAndBytesConfig{...}           bits_and_bytes_config.lua
--   accel.quantization.Linear4bit           linear_4bit.lua
--   from_pretrained(dir, {quantization_config = ...}) quantizes while loading
--   (quantized_loading.lua); prepare is its hook.
local args = require("accel.util.args")
local loading = require("accel.quantization.quantized_loading")

local quantization = {
  BitsAndBytesConfig = require("accel.quantization.bits_and_bytes_config"),
  Linear4bit = require("accel.quantization.linear_4bit"),
}

-- Called by accel.models.from_pretrained with the model built on the meta
-- device, its config and options: nil when the load is not a 4-bit one,
-- else a function(dir, source_name) that fills the 4-bit layers once the
-- rest is loaded. The model's config then carries quantization_config (so
-- save_pretrained writes a 4-bit folder) and model.is_loaded_in_4bit is true.
function quantization.prepare(model, cfg, o, where)
  local config, prequantized = loading.config(cfg, o.quantization_config, where)
  if not config then return nil end
  local device = "cpu"
  if o.device_map ~= nil then
    local only = type(o.device_map) == "table" and o.device_map[""]
    if not only or next(o.device_map, next(o.device_map)) ~= nil then
      args.error(where .. ": a 4-bit model loads on one device: give device_map = {[\"\"] = device} or none")
    end
    device = only
  end
  if o.offload_folder then args.error(where .. ": a 4-bit model cannot be offloaded to disk (offload_folder)") end
  local swapped = loading.plan(model, config)
  return function(dir, source_name)
    loading.fill(dir, swapped, { source_name = source_name, dtype = o.dtype ~= "auto" and o.dtype or nil,
                                 device = device, prequantized = prequantized })
    cfg.quantization_config = config:to_dict()
    rawset(model, "is_loaded_in_4bit", true)
    rawset(model, "quantization_config", config)
  end
end

return quantization
