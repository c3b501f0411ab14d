-- accel.GradientAccumulationPlugin: gradient accumulation spelled as
-- Accelerate's plugin, passed as Accelerator{gradient_accumulation_plugin = ...}.
--   accel.GradientAccumulationPlugin{ num_steps = 4, sync_each_batch = true }
-- num_steps: micro-steps per optimizer update. sync_with_dataloader: the
-- last batch of a prepared loader ends an accumulation (default true).
-- sync_each_batch: gradients are all-reduced on every micro-step, not only
-- the last of an accumulation, which saves no communication but keeps no
-- unsynchronised gradients (as DDP without no_sync); updates are the same.
-- adjust_scheduler: the scheduler advances once per optimizer update, which
-- is what accel always does, so only true is accepted.
local args = require("accel.util.args")

local GradientAccumulationPlugin = {}
GradientAccumulationPlugin.__index = GradientAccumulationPlugin

local where = "accel.GradientAccumulationPlugin"

local function new(_, options)
  local o = args.options(where, options, {
    num_steps = args.NONE,
    adjust_scheduler = true,
    sync_with_dataloader = true,
    sync_each_batch = false,
  }, { adjust_scheduler = "boolean", sync_with_dataloader = "boolean", sync_each_batch = "boolean" })
  if o.num_steps == nil then args.error(where .. ": num_steps is required") end
  args.positive_integer(where, "num_steps", o.num_steps)
  if not o.adjust_scheduler then
    args.error(where .. ": adjust_scheduler = false is not supported: a prepared scheduler always "
               .. "advances once per optimizer update")
  end
  return setmetatable(o, GradientAccumulationPlugin)
end

function GradientAccumulationPlugin.is(value)
  return type(value) == "table" and getmetatable(value) == GradientAccumulationPlugin
end

return setmetatable(GradientAccumulationPlugin, { __call = new })
