-- accel.models.from_pretrained(dir, {dtype, device_map, max_memory,
-- offload_folder, quantization_config}): reads dir/config.json, picks the architecture by
-- model_type, builds it under accel.init_empty_weights and fills it with
-- accel.load_checkpoint_and_dispatch (model.safetensors, shards with
-- model.safetensors.index.json, or pytorch_model.bin; dtype conversion,
-- device maps and offloading come with it). The model is returned in eval
-- mode, as transformers returns it. dtype = "auto" loads as config.json's
-- torch_dtype (or dtype) says. Under a pipeline's acc:build_model
-- (big_modeling/deferred_loading.lua) the model is built empty and its
-- checkpoint recorded, not read: each pp rank reads its stages' tensors
-- alone (parallel/pipeline/stage_loading.lua); the big-model options are
-- refused there.
local core = require("accel.core")
local args = require("accel.util.args")
local config = require("accel.models.config")
local architectures = require("accel.models.architectures")
local checkpoint_sizes = require("accel.models.checkpoint_sizes")
local generation_config = require("accel.models.generation_config")
local init_empty_weights = require("accel.big_modeling.init_empty_weights")
local load_checkpoint_and_dispatch = require("accel.big_modeling.load_checkpoint_and_dispatch")
local deferred_loading = require("accel.big_modeling.deferred_loading")
local quantization = require("accel.quantization")

-- The checkpoint's name for a model tensor: its own, or with the base
-- model's prefix (the class's base_model_prefix) taken off or put on,
-- whichever the checkpoint holds: a checkpoint of the bare model
-- ("h.0.attn...", as GPT-2's own files are) loads into the model with a
-- head ("transformer.h.0.attn..."), and one of a model with a head
-- ("bert.encoder...", from BertForMaskedLM) into the bare model.
local function with_or_without(prefix)
  local head = prefix .. "."
  return function(name, holds)
    if holds[name] then return name end
    if name:sub(1, #head) == head and holds[name:sub(#head + 1)] then return name:sub(#head + 1) end
    if holds[head .. name] then return head .. name end
    return name
  end
end

return function(dir, options)
  local where = "accel.models.from_pretrained"
  local o = args.options(where, options, { dtype = args.NONE, device_map = args.NONE, max_memory = args.NONE,
                                           offload_folder = args.NONE, quantization_config = args.NONE },
                         { dtype = "string", device_map = "string|table", max_memory = "table",
                           offload_folder = "string", quantization_config = "table" })
  if not config.is_folder(dir) then args.error(where .. ": '" .. tostring(dir) .. "' is not a folder") end
  local cfg = config.read(dir)
  local cls = architectures.of(cfg)
  checkpoint_sizes.check(cfg, dir)
  local dtype = o.dtype
  if dtype == "auto" then dtype = cfg.torch_dtype or cfg.dtype end
  local model = init_empty_weights(function() return cls(cfg) end)
  local source_name = with_or_without(cls.base_model_prefix)
  if deferred_loading.active() then
    for _, key in ipairs({ "device_map", "max_memory", "offload_folder", "quantization_config" }) do
      if o[key] ~= nil then
        args.error(string.format("%s: %s is not supported under a pipeline's acc:build_model, which reads each "
                                 .. "rank's stages alone (docs/api/parallelism.md)", where, key))
      end
    end
    deferred_loading.record(model, { path = dir, dtype = dtype, source_name = source_name })
  else
    -- 4-bit (accel.quantization): linears swapped now, filled after the rest.
    local quantized = quantization.prepare(model, cfg, o, where)
    load_checkpoint_and_dispatch(model, dir, {
      dtype = dtype,
      device_map = o.device_map,
      max_memory = o.max_memory,
      offload_folder = o.offload_folder,
      no_split_module_classes = o.device_map == "auto" and cls._no_split_modules or nil,
      source_name = source_name,
    })
    if quantized then quantized(dir, source_name) end
  end
  local generation_file = dir .. "/generation_config.json"
  if core.formats.file_kind(generation_file) ~= "missing" then
    rawset(model, "generation_config", generation_config.read(generation_file))
  end
  return model:eval()
end
