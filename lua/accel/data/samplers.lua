-- PyTorch's sampler classes, for the DataLoader's `sampler` and
-- `batch_sampler` options (sampler.lua reads anything with iter(epoch)):
--   data.SequentialSampler(dataset)             1, 2, ..., #dataset
--   data.RandomSampler(dataset, {seed})         a permutation per epoch
--   data.BatchSampler(sampler, {batch_size, drop_last})
--                                               the sampler's indices in lists
-- Every rank must draw the same order, so RandomSampler takes the engine's
-- permutation of seed + epoch (engine/data/epoch_plan.h), as shuffling
-- loaders do; seed defaults to accel.initial_seed() when an epoch starts.
local core = require("accel.core")
local random = require("accel.util.random")
local args = require("accel.util.args")
local dataset_util = require("accel.data.dataset")

local samplers = {}

local function class(name)
  local c = { __name = name }
  c.__index = c
  c.__len = function(self) return self:len() end
  return c
end

local SequentialSampler = class("SequentialSampler")

function SequentialSampler:len() return dataset_util.length(self.dataset) end

function SequentialSampler:iter()
  local out = {}
  for i = 1, self:len() do out[i] = i end
  return out
end

samplers.SequentialSampler = function(dataset)
  dataset_util.check(dataset, "data.SequentialSampler", 2)
  return setmetatable({ dataset = dataset }, SequentialSampler)
end

local RandomSampler = class("RandomSampler")

RandomSampler.len = SequentialSampler.len

function RandomSampler:iter(epoch)
  local n = self:len()
  local plan = core.data.EpochPlan({
    dataset_size = n, world_size = 1, rank = 0, batch_size = math.max(n, 1), shuffle = true,
    seed = self.seed or random.initial_seed(), drop_last = false, even_batches = true,
    epoch = epoch or 0, start = 0,
  })
  return (plan:indices(1) + 1):totable()
end

samplers.RandomSampler = function(dataset, options)
  dataset_util.check(dataset, "data.RandomSampler", 2)
  local o = args.options("data.RandomSampler", options, { seed = args.NONE })
  if o.seed ~= nil and (type(o.seed) ~= "number" or o.seed % 1 ~= 0) then
    args.error("data.RandomSampler: seed must be an integer, got " .. tostring(o.seed))
  end
  return setmetatable({ dataset = dataset, seed = o.seed }, RandomSampler)
end

local BatchSampler = class("BatchSampler")

function BatchSampler:len()
  local n = #self.sampler
  local len = getmetatable(self.sampler) and getmetatable(self.sampler).__len
  if len then n = len(self.sampler) end
  if self.drop_last then return math.floor(n / self.batch_size) end
  return math.ceil(n / self.batch_size)
end

function BatchSampler:iter(epoch)
  local source = self.sampler
  local indices = type(source) == "function" and source(epoch)
                  or (type(source.iter) == "function" and source:iter(epoch)) or source
  local out, batch = {}, {}
  for _, index in ipairs(indices) do
    batch[#batch + 1] = index
    if #batch == self.batch_size then
      out[#out + 1], batch = batch, {}
    end
  end
  if #batch > 0 and not self.drop_last then out[#out + 1] = batch end
  return out
end

samplers.BatchSampler = function(sampler, options)
  if type(sampler) ~= "table" and type(sampler) ~= "function" then
    args.error("data.BatchSampler: expected a sampler (a table with iter(epoch), a list or a function), got a "
               .. type(sampler))
  end
  local o = args.options("data.BatchSampler", options, { batch_size = args.NONE, drop_last = false })
  args.positive_integer("data.BatchSampler", "batch_size", o.batch_size)
  if type(o.drop_last) ~= "boolean" then
    args.error("data.BatchSampler: drop_last must be a boolean, got a " .. type(o.drop_last))
  end
  return setmetatable({ sampler = sampler, batch_size = o.batch_size, drop_last = o.drop_last }, BatchSampler)
end

return samplers
