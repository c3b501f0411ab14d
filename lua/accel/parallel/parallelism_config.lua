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
-- Pipeline parallelism (torchtitan's names): pp_size stages, the mesh's
-- outermost dim, run by pp_schedule ("GPipe", "1F1B", "Interleaved1F1B",
-- "InterleavedZeroBubble"; pipeline/schedules.lua) over pp_microbatches
-- micro-batches (default pp_size) with pp_virtual_stages stages per rank;
-- the schedule is built and checked here, so sizes it cannot run are
-- refused when the config is made. ep_size: ranks of dp_shard x cp that
-- split the experts (the engine checks that it divides them).
local core = require("accel.core")
local args = require("accel.util.args")

local ParallelismConfig = {}
ParallelismConfig.__index = ParallelismConfig

local where = "accel.ParallelismConfig"
local defaults = { dp_replicate_size = 1, dp_shard_size = 1, tp_size = 1, cp_size = 1, pp_size = 1, ep_size = 1,
                   pp_schedule = "1F1B", pp_microbatches = args.NONE, pp_virtual_stages = 1 }
local types = { dp_replicate_size = "number", dp_shard_size = "number", tp_size = "number", cp_size = "number",
                pp_size = "number", ep_size = "number", pp_schedule = "string", pp_microbatches = "number",
                pp_virtual_stages = "number" }

function ParallelismConfig.new(options)
  local o = args.options(where, options, defaults, types)
  local launch = (core.launch or {}).parallelism_config or {}
  for key in pairs(types) do
    if (options or {})[key] == nil and launch[key] then o[key] = launch[key] end
    if types[key] == "number" and o[key] ~= nil and o[key] % 1 ~= 0 then
      args.error(string.format("%s: %s must be a whole number, got %s", where, key, tostring(o[key])))
    end
  end
  o.pp_microbatches = o.pp_microbatches or o.pp_size
  if o.pp_size > 1 or o.pp_virtual_stages > 1 then
    -- The schedule's own refusals name the sizes (pp_microbatches < pp_size for 1F1B, ...).
    -- pipeline/schedules.lua is required only for a pipeline (lua/accel/init.lua: the heap).
    local ok, err = pcall(require("accel.parallel.pipeline.schedules").build, o.pp_schedule,
                          { pp = o.pp_size, microbatches = o.pp_microbatches, virtual_stages = o.pp_virtual_stages })
    if not ok then
      args.error(where .. ": " .. tostring(err):gsub("^.-accel%.parallel%.pipeline%.schedules%.build: ", ""))
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

-- The pipeline's and ep's keys appear when they are not 1.
function ParallelismConfig:__tostring()
  local more = ""
  if self.pp_size > 1 then
    more = string.format(", pp_size = %d, pp_schedule = %q, pp_microbatches = %d, pp_virtual_stages = %d",
                         self.pp_size, self.pp_schedule, self.pp_microbatches, self.pp_virtual_stages)
  end
  if self.ep_size > 1 then more = more .. string.format(", ep_size = %d", self.ep_size) end
  return string.format("ParallelismConfig{dp_replicate_size = %d, dp_shard_size = %d, cp_size = %d, tp_size = %d%s}",
                       self.dp_replicate_size, self.dp_shard_size, self.cp_size, self.tp_size, more)
end

return setmetatable(ParallelismConfig, { __call = function(_, options) return ParallelismConfig.new(options) end })
