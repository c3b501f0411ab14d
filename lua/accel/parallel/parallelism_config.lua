-- accel.ParallelismConfig: how the ranks split the work, in Accelerate's
-- (and torchtitan's) words, passed as Accelerator{parallelism_config = ...}.
--   accel.ParallelismConfig{ dp_replicate_size = 1, dp_shard_size = 1, tp_size = 2, cp_size = 1 }
-- A size left out takes the launch's (accel-run's
-- --parallelism-config-tp-size and the config file's parallelism_config
-- keys, accel.core.launch.parallelism_config), else 1, as Accelerate's
-- ParallelismConfig reads PARALLELISM_CONFIG_*_SIZE. The sizes are checked against the world once,
-- when the Accelerator makes its mesh (engine/protocol/device_mesh.h): each a
-- positive integer, their product the number of processes.
-- dp_shard_size > 1 is FSDP over dp_shard (parallel/fsdp/mesh_sharding.lua);
-- docs/api/parallelism.md says which layouts are implemented.
local core = require("accel.core")
local args = require("accel.util.args")

local ParallelismConfig = {}
ParallelismConfig.__index = ParallelismConfig

local where = "accel.ParallelismConfig"
local defaults = { dp_replicate_size = 1, dp_shard_size = 1, tp_size = 1, cp_size = 1 }
local types = { dp_replicate_size = "number", dp_shard_size = "number", tp_size = "number", cp_size = "number" }

function ParallelismConfig.new(options)
  local o = args.options(where, options, defaults, types)
  local launch = (core.launch or {}).parallelism_config or {}
  for key in pairs(defaults) do
    if (options or {})[key] == nil and launch[key] then o[key] = launch[key] end
    if o[key] % 1 ~= 0 then
      args.error(string.format("%s: %s must be a whole number, got %s", where, key, tostring(o[key])))
    end
  end
  return setmetatable(o, ParallelismConfig)
end

-- The Accelerator's default when the recipe gives none: the launch's
-- sizes, or nil when the launch gives none (no mesh).
function ParallelismConfig.from_launch()
  if (core.launch or {}).parallelism_config then return ParallelismConfig.new({}) end
  return nil
end

function ParallelismConfig.is(value)
  return getmetatable(value) == ParallelismConfig
end

function ParallelismConfig:__tostring()
  return string.format("ParallelismConfig{dp_replicate_size = %d, dp_shard_size = %d, cp_size = %d, tp_size = %d}",
                       self.dp_replicate_size, self.dp_shard_size, self.cp_size, self.tp_size)
end

return setmetatable(ParallelismConfig, { __call = function(_, options) return ParallelismConfig.new(options) end })
