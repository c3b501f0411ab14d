-- accel.ParallelismConfig: how the ranks split the work, in Accelerate's
-- (and torchtitan's) words, passed as Accelerator{parallelism_config = ...}.
--   accel.ParallelismConfig{ dp_replicate_size = 1, dp_shard_size = 1, tp_size = 2, cp_size = 1 }
-- Each size defaults to 1. The sizes are checked against the world once,
-- when the Accelerator makes its mesh (engine/parallel/device_mesh.h): each a
-- positive integer, their product the number of processes.
-- This slice trains dp_replicate x tp; dp_shard (FSDP) and cp (context
-- parallel) above 1 are refused by the Accelerator as not implemented yet
-- (docs/api/parallelism.md).
local args = require("accel.args")

local ParallelismConfig = {}
ParallelismConfig.__index = ParallelismConfig

local where = "accel.ParallelismConfig"
local defaults = { dp_replicate_size = 1, dp_shard_size = 1, tp_size = 1, cp_size = 1 }
local types = { dp_replicate_size = "number", dp_shard_size = "number", tp_size = "number", cp_size = "number" }

function ParallelismConfig.new(options)
  local o = args.options(where, options, defaults, types)
  for key in pairs(defaults) do
    if o[key] % 1 ~= 0 then
      args.error(string.format("%s: %s must be a whole number, got %s", where, key, tostring(o[key])))
    end
  end
  return setmetatable(o, ParallelismConfig)
end

function ParallelismConfig.is(value)
  return getmetatable(value) == ParallelismConfig
end

function ParallelismConfig:__tostring()
  return string.format("ParallelismConfig{dp_replicate_size = %d, dp_shard_size = %d, cp_size = %d, tp_size = %d}",
                       self.dp_replicate_size, self.dp_shard_size, self.cp_size, self.tp_size)
end

return setmetatable(ParallelismConfig, { __call = function(_, options) return ParallelismConfig.new(options) end })
