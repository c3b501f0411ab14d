-- The Accelerator: what a recipe calls to train the same loop on any number
-- of ranks. See docs/ for the full contract.
local core = require("accel.core")
local Module = require("accel.nn.module")
local DataLoader = require("accel.data.dataloader")

local dist = core.dist

local Accelerator = {}
Accelerator.__index = Accelerator

local defaults = {
  mixed_precision = "no",
  gradient_accumulation_steps = 1,
  cpu = false,
  bucket_bytes = 25 * 1024 * 1024,
}

local function check_options(options)
  for key in pairs(options) do
    if defaults[key] == nil then
      local known = {}
      for k in pairs(defaults) do known[#known + 1] = k end
      table.sort(known)
      error(string.format("accel.Accelerator: unknown option '%s' (known: %s)", tostring(key),
                          table.concat(known, ", ")), 3)
    end
  end
  if options.mixed_precision ~= nil and options.mixed_precision ~= "no" then
    error("accel.Accelerator: mixed_precision '" .. tostring(options.mixed_precision) ..
          "' is not available yet; use 'no'", 3)
  end
end

local function new(_, options)
  options = options or {}
  check_options(options)
  local state = dist.state()
  local self = setmetatable({
    process_index = state.rank,
    local_process_index = state.local_rank,
    num_processes = state.world_size,
    is_main_process = state.rank == 0,
    is_local_main_process = state.local_rank == 0,
    device = "cpu",
    distributed_type = state.world_size > 1 and "MULTI_CPU" or "NO",
    mixed_precision = options.mixed_precision or defaults.mixed_precision,
    gradient_accumulation_steps = options.gradient_accumulation_steps or defaults.gradient_accumulation_steps,
    sync_gradients = true,
    bucket_bytes = options.bucket_bytes or defaults.bucket_bytes,
    _syncs = {},
  }, Accelerator)
  if state.world_size > 1 then dist.init() end
  return self
end

local function is_optimizer(v)
  return type(v) == "userdata" and getmetatable(v) ~= nil and v.step ~= nil and v.zero_grad ~= nil
end

function Accelerator:prepare_model(model)
  core.no_grad(function()
    for _, p in ipairs(model:parameters()) do dist.broadcast(p, 0) end
    for _, b in ipairs(model:buffers()) do dist.broadcast(b, 0) end
  end)
  if self.num_processes > 1 then
    self._syncs[#self._syncs + 1] = dist.GradientSync(model:parameters(), self.bucket_bytes)
  end
  return model
end

function Accelerator:prepare_data_loader(loader)
  loader:shard(self.process_index, self.num_processes)
  return loader
end

-- Prepares models, optimizers and data loaders, in any order; returns them
-- in the order given.
function Accelerator:prepare(...)
  local out, n = {}, select("#", ...)
  for i = 1, n do
    local obj = select(i, ...)
    if Module.is_module(obj) then
      out[i] = self:prepare_model(obj)
    elseif getmetatable(obj) == DataLoader then
      out[i] = self:prepare_data_loader(obj)
    elseif is_optimizer(obj) then
      out[i] = obj
    else
      error(string.format("Accelerator:prepare: argument %d (a %s) is not a model, optimizer or data loader",
                          i, type(obj)), 2)
    end
  end
  return unpack(out, 1, n)
end

-- Runs autograd from `loss`, then averages gradients across ranks.
function Accelerator:backward(loss)
  if self.gradient_accumulation_steps > 1 then loss = loss / self.gradient_accumulation_steps end
  loss:backward()
  if self.sync_gradients then
    for _, sync in ipairs(self._syncs) do sync:synchronize() end
  end
end

function Accelerator:print(...)
  if self.is_main_process then print(...) end
end

function Accelerator:wait_for_everyone()
  if self.num_processes > 1 then dist.barrier() end
end

local function map_tensors(value, fn, what)
  if type(value) == "number" then return fn(core.tensor(value)) end
  if type(value) == "table" then
    local out = {}
    for k, v in pairs(value) do out[k] = map_tensors(v, fn, what) end
    return out
  end
  if type(value) ~= "userdata" then
    error(what .. ": expected a tensor, a number or a table of them, got a " .. type(value), 3)
  end
  return fn(value)
end

-- Every rank's tensor, concatenated along dim 1 in rank order (0-dim
-- tensors are stacked). Tables of tensors are gathered element by element.
function Accelerator:gather(value)
  return map_tensors(value, function(t)
    if self.num_processes == 1 then return t:dim() == 0 and t:view(1) or t end
    local parts = dist.all_gather(t:contiguous())
    if t:dim() == 0 then return core.stack(parts, 1) end
    return core.cat(parts, 1)
  end, "Accelerator:gather")
end

-- The sum ("sum", the default) or mean ("mean") of a tensor over ranks, as
-- a new tensor on every rank.
function Accelerator:reduce(value, op)
  op = op or "sum"
  if op ~= "sum" and op ~= "mean" then
    error("Accelerator:reduce: op must be 'sum' or 'mean', got '" .. tostring(op) .. "'", 2)
  end
  return map_tensors(value, function(t)
    local copy = t:detach():clone():contiguous()
    if self.num_processes > 1 then dist.all_reduce(copy, op) end
    return copy
  end, "Accelerator:reduce")
end

return setmetatable(Accelerator, { __call = new })
