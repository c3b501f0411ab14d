-- What an Accelerator's zero_stage and fsdp_plugin options (or accel-run's
-- --zero-stage and --use-fsdp, in accel.core.launch) ask for:
-- nil for plain data parallel, else
--   {stage = 1|2|3, policy = {kind, classes, min_num_params},
--    state_dict_type = "FULL_STATE_DICT"|"SHARDED_STATE_DICT", name = ...,
--    mixed_precision = an accel.MixedPrecisionPolicy or nil}
-- where `name` is the distributed_type Accelerate reports ("DEEPSPEED" or "FSDP")
-- and `empty_init` whether acc:build_model builds empty on ranks other than
-- the main process: the plugin's cpu_ram_efficient_loading, or DeepSpeed's
-- zero3_init_flag (accel.core.launch.zero3_init_flag) at stage 3, where
-- Accelerate uses it too.
local core = require("accel.core")
local args = require("accel.util.args")
local FullyShardedDataParallelPlugin = require("accel.parallel.fsdp.fsdp_plugin")
local DeepSpeedPlugin = require("accel.parallel.fsdp.deepspeed_plugin")

local settings = {}

-- zero_stage = 3 names no wrap policy: modules are gathered by size, each
-- unit about a million parameters or more (docs/api/sharding.md).
settings.ZERO3_MIN_NUM_PARAMS = 1000000

function settings.resolve(where, zero_stage, fsdp_plugin, deepspeed_plugin)
  local launch = core.launch or {}
  if deepspeed_plugin ~= nil then
    if zero_stage ~= nil or fsdp_plugin ~= nil then
      args.error(where .. ": give one of zero_stage, fsdp_plugin and deepspeed_plugin")
    end
    if not DeepSpeedPlugin.is(deepspeed_plugin) then
      args.error(where .. ": deepspeed_plugin must be made by accel.DeepSpeedPlugin{...}")
    end
    zero_stage = deepspeed_plugin.zero_stage
  end
  if zero_stage ~= nil and fsdp_plugin ~= nil then
    args.error(where .. ": give zero_stage or fsdp_plugin, not both (they say the same in DeepSpeed's and FSDP's words)")
  end
  if fsdp_plugin == nil and zero_stage == nil then
    if launch.fsdp then
      fsdp_plugin = FullyShardedDataParallelPlugin{}
    else
      zero_stage = launch.zero_stage
    end
  end
  if fsdp_plugin ~= nil then
    if not FullyShardedDataParallelPlugin.is(fsdp_plugin) then
      args.error(where .. ": fsdp_plugin must be made by accel.FullyShardedDataParallelPlugin{...}")
    end
    if fsdp_plugin.stage == 0 then return nil end
    return {
      stage = fsdp_plugin.stage,
      policy = { kind = fsdp_plugin.auto_wrap_policy, classes = fsdp_plugin.transformer_layer_cls,
                 min_num_params = fsdp_plugin.min_num_params },
      state_dict_type = fsdp_plugin.state_dict_type,
      cpu_offload = fsdp_plugin.cpu_offload or nil,
      empty_init = fsdp_plugin.cpu_ram_efficient_loading,
      mixed_precision = fsdp_plugin.mixed_precision_policy,
      name = "FSDP",
    }
  end
  if zero_stage == nil or zero_stage == 0 then return nil end
  if zero_stage ~= 1 and zero_stage ~= 2 and zero_stage ~= 3 then
    args.error(where .. ": zero_stage must be 1, 2 or 3, got " .. tostring(zero_stage))
  end
  return {
    stage = zero_stage,
    policy = { kind = "SIZE_BASED_WRAP", min_num_params = settings.ZERO3_MIN_NUM_PARAMS },
    state_dict_type = "FULL_STATE_DICT",
    cpu_offload = deepspeed_plugin and deepspeed_plugin.cpu_offload or nil,
    empty_init = zero_stage == 3 and (deepspeed_plugin and deepspeed_plugin.zero3_init_flag
                                      or not deepspeed_plugin and launch.zero3_init_flag == true),
    name = "DEEPSPEED",
  }
end

return settings
