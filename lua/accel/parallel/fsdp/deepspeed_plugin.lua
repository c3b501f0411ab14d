-- accel.DeepSpeedPlugin: ZeRO spelled as Accelerate's DeepSpeedPlugin, passed
-- as Accelerator{deepspeed_plugin = ...} (instead of zero_stage):
--   accel.DeepSpeedPlugin{ zero_stage = 3, offload_optimizer_device = "cpu",
--     offload_param_device = "cpu" }
-- zero_stage: 0 (plain data parallel), 1, 2 or 3; default the launch's
--   (accel-run --zero-stage) or 2, as Accelerate's.
-- offload_optimizer_device / offload_param_device: "none" (default) or
--   "cpu": ZeRO-Offload (parallel/fsdp/cpu_offload.lua).
-- zero3_init_flag: at stage 3, acc:build_model builds the model empty on
--   ranks other than the main process; default the launch's.
local core = require("accel.core")
local args = require("accel.util.args")
local cpu_offload = require("accel.parallel.fsdp.cpu_offload")

local Plugin = {}
Plugin.__index = Plugin

local where = "accel.DeepSpeedPlugin"

local function new(_, options)
  local launch = core.launch or {}
  local o = args.options(where, options, {
    zero_stage = args.NONE, offload_optimizer_device = args.NONE, offload_param_device = args.NONE,
    zero3_init_flag = args.NONE,
  }, { zero_stage = "number", offload_optimizer_device = "string", offload_param_device = "string",
       zero3_init_flag = "boolean" })
  local stage = o.zero_stage or launch.zero_stage or 2
  if stage ~= 0 and stage ~= 1 and stage ~= 2 and stage ~= 3 then
    args.error(where .. ": zero_stage must be 0, 1, 2 or 3, got " .. tostring(stage))
  end
  local init_flag = o.zero3_init_flag
  if init_flag == nil then init_flag = launch.zero3_init_flag == true end
  return setmetatable({
    zero_stage = stage,
    offload_optimizer_device = o.offload_optimizer_device or "none",
    offload_param_device = o.offload_param_device or "none",
    zero3_init_flag = init_flag,
    cpu_offload = cpu_offload.from_deepspeed(where, stage, o.offload_optimizer_device, o.offload_param_device),
  }, Plugin)
end

function Plugin.is(value)
  return type(value) == "table" and getmetatable(value) == Plugin
end

return setmetatable(Plugin, { __call = new })
