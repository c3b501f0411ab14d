-- accel.models: the architectures of Hugging Face checkpoints, as modules
-- whose state_dict names are transformers' own.
--   local model = accel.models.from_pretrained(dir, {dtype, device_map, max_memory, offload_folder})
--   local cfg = accel.models.config(dir)
--   local fresh = accel.models.from_config(cfg_or_dir)   -- initialised as transformers does
--   model:save_pretrained(dir)
-- Which model_type builds which class: architectures.lua.
return {
  from_pretrained = require("accel.models.from_pretrained"),
  from_config = require("accel.models.from_config"),
  config = require("accel.models.config").of_folder,
  -- sentence-transformers' mean pooling of a BERT's last_hidden_state (bert.lua).
  mean_pooling = require("accel.models.bert").mean_pooling,
}
