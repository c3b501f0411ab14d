-- accel.PartialState(): the process facts and the collectives that need no
-- model, for inference and evaluation scripts, as Accelerate's PartialState.
--   local state = accel.PartialState()
--   local mine = state:split_between_processes(prompts)
-- The Accelerator is made on one and inherits these methods.
local core = require("accel.core")
local args = require("accel.util.args")
local gathering = require("accel.gathering")
local guard = require("accel.collective_guard")
local random = require("accel.util.random")

local dist = core.dist

local PartialState = {}
PartialState.__index = PartialState

-- The fields every state (and every Accelerator) carries.
PartialState.FACTS = { "process_index", "local_process_index", "num_processes", "is_main_process",
                       "is_local_main_process", "is_last_process", "device", "distributed_type",
                       "backend", "_world" }

-- Where this rank computes, as Accelerate decides it: GPU local_rank when
-- GPUs are visible and `cpu` is not set (ranks beyond the GPU count share
-- them round-robin: they can only reduce over gloo), else the CPU.
local function choose_device(s, cpu)
  if cpu or not core.cuda.is_available() then return "cpu" end
  return "cuda:" .. (s.local_rank % core.cuda.device_count())
end

local function new(_, options)
  args.options("accel.PartialState", options, { cpu = false })
  local s = dist.state()
  local device = choose_device(s, options and options.cpu)
  local multi = device == "cpu" and "MULTI_CPU" or "MULTI_GPU"
  local self = setmetatable({
    process_index = s.rank,
    local_process_index = s.local_rank,
    num_processes = s.world_size,
    is_main_process = s.rank == 0,
    is_local_main_process = s.local_rank == 0,
    is_last_process = s.rank == s.world_size - 1,
    device = device,
    distributed_type = s.world_size > 1 and multi or "NO",
    _world = { rank = s.rank, size = s.world_size },
  }, PartialState)
  -- A GPU rank joins now even alone: the GPU becomes the current device,
  -- and a launch that named nccl gets a real (one-rank) NCCL group.
  if s.world_size > 1 or device ~= "cpu" then
    dist.init(device)
    self.backend = dist.backend()
  end
  return self
end

function PartialState.is(value)
  return type(value) == "table" and getmetatable(value) == PartialState
end

-- Collectives (lua/accel/gathering.lua) --------------------------------------

function PartialState:gather(value)
  return gathering.gather(self._world, value)
end

-- op: "sum" (default), "mean", "max", "min" or "none"; the result times `scale`.
function PartialState:reduce(value, op, scale)
  return gathering.reduce(self._world, value, op, scale)
end

function PartialState:broadcast(value, from)
  return gathering.broadcast(self._world, value, from)
end

function PartialState:pad_across_processes(value, options)
  return gathering.pad_across_processes(self._world, value, options)
end

function PartialState:gather_object(value)
  return gathering.gather_object(self._world, value)
end

function PartialState:split_between_processes(value, options)
  return gathering.split_between_processes(self._world, value, options)
end

function PartialState:wait_for_everyone()
  if self.num_processes > 1 then dist.barrier() end
end

-- Copies rank 0's generator states (the engine's and math.random's) to
-- every rank.
function PartialState:synchronize_rng_states()
  random.synchronize(self._world)
end

-- Process helpers ------------------------------------------------------------

function PartialState:print(...)
  if self.is_main_process then print(...) end
end

-- fn runs on the main process first, then on the others. An error in fn
-- ends the rank (see collective_guard.lua): the others wait for it.
function PartialState:main_process_first(fn)
  return guard(self._world, function()
    if not self.is_main_process then self:wait_for_everyone() end
    local results = { fn() }
    if self.is_main_process then self:wait_for_everyone() end
    return unpack(results, 1, table.maxn(results))
  end)
end

-- Each runs fn (and returns its results) on the processes it names only.
function PartialState:on_main_process(fn)
  if self.is_main_process then return fn() end
end

function PartialState:on_local_main_process(fn)
  if self.is_local_main_process then return fn() end
end

function PartialState:on_last_process(fn)
  if self.is_last_process then return fn() end
end

-- on_process(fn, index), Accelerate's order, or on_process(index, fn): the
-- function is told from the rank by its type.
local function function_and_index(where, a, b, count)
  local fn, index = a, b
  if type(a) ~= "function" then fn, index = b, a end
  if type(fn) ~= "function" then
    args.error(string.format("%s: expected a function and a process index, got a %s and a %s", where,
                             type(a), type(b)))
  end
  if type(index) ~= "number" or index % 1 ~= 0 or index < 0 or index >= count then
    args.error(string.format("%s: the process index must be an integer from 0 to %d, got %s", where,
                             count - 1, tostring(index)))
  end
  return fn, index
end

-- `index` is a rank (0-based), as process_index.
function PartialState:on_process(a, b)
  local fn, index = function_and_index("on_process", a, b, self.num_processes)
  if self.process_index == index then return fn() end
end

-- `index` is a rank on this machine (0-based), as local_process_index.
function PartialState:on_local_process(a, b)
  local fn, index = function_and_index("on_local_process", a, b, dist.state().local_world_size)
  if self.local_process_index == index then return fn() end
end

return setmetatable(PartialState, { __call = new })
