-- Batches of a data set, sharded across ranks once prepared:
--   local loader = data.DataLoader(dataset, {batch_size = 64, shuffle = true})
--   for x, y in loader:iter() do ... end
-- Each epoch's order comes from the engine's sampler (the same permutation
-- on every rank, from the shared seed plus the epoch), and each rank reads
-- an interleaved shard of it, so R ranks with batch B see exactly the
-- samples one rank with batch R*B sees.
local core = require("accel.core")

local DataLoader = {}
DataLoader.__index = DataLoader

local known_options = { batch_size = true, shuffle = true, drop_last = true, seed = true,
                        collate = true }

local function new(dataset, options)
  options = options or {}
  for key in pairs(options) do
    if not known_options[key] then
      error("data.DataLoader: unknown option '" .. tostring(key) .. "'", 3)
    end
  end
  local batch_size = options.batch_size or 1
  if type(batch_size) ~= "number" or batch_size < 1 or batch_size % 1 ~= 0 then
    error("data.DataLoader: batch_size must be a positive integer, got " .. tostring(batch_size), 3)
  end
  return setmetatable({
    dataset = dataset,
    batch_size = batch_size,
    shuffle = options.shuffle or false,
    drop_last = options.drop_last or false,
    seed = options.seed,
    collate = options.collate,
    epoch = 0,
    rank = 0,
    world_size = 1,
  }, DataLoader)
end

-- Called by Accelerator:prepare.
function DataLoader:shard(rank, world_size)
  self.rank, self.world_size = rank, world_size
end

local function dataset_length(dataset)
  local mt = getmetatable(dataset)
  if mt and mt.__len then return mt.__len(dataset) end
  return #dataset
end

function DataLoader:set_epoch(epoch)
  self.epoch = epoch
end

-- This rank's indices (0-based, engine side) and padding count for the epoch.
function DataLoader:epoch_indices()
  local seed = self.seed or require("accel").initial_seed()
  return core.data.shard(dataset_length(self.dataset), self.world_size, self.rank,
                         self.shuffle, seed, self.epoch, false)
end

-- Batches this rank reads per epoch. (`#loader` needs Lua 5.2 semantics;
-- LuaJIT ignores __len on tables, so recipes call loader:num_batches().)
function DataLoader:num_batches()
  local n = dataset_length(self.dataset)
  local per_rank = math.ceil(n / self.world_size)
  if self.drop_last then return math.floor(per_rank / self.batch_size) end
  return math.ceil(per_rank / self.batch_size)
end

local function stack_samples(samples)
  local fields = {}
  for k = 1, #samples[1] do
    local column = {}
    for i, s in ipairs(samples) do column[i] = s[k] end
    fields[k] = type(column[1]) == "number" and core.tensor(column) or core.stack(column, 1)
  end
  return fields
end

local function batch_of(self, rows)
  local tensors = rawget(self.dataset, "tensors")
  if tensors and not self.collate then
    return core.data.take_rows(tensors, rows)
  end
  local samples = {}
  for i, index in ipairs(rows:totable()) do
    samples[i] = { self.dataset:get(index + 1) }
  end
  if self.collate then return { self.collate(samples) } end
  return stack_samples(samples)
end

-- Iterates one epoch; the next call reads the next epoch.
function DataLoader:iter()
  local indices = self:epoch_indices()
  local epoch_batches = self:num_batches()
  self.epoch = self.epoch + 1
  local n, b = indices:size(1), 0
  return function()
    if b >= epoch_batches then return nil end
    local start = b * self.batch_size
    b = b + 1
    local rows = indices:narrow(1, start + 1, math.min(self.batch_size, n - start))
    return unpack(batch_of(self, rows))
  end
end

DataLoader.__len = DataLoader.num_batches

return setmetatable(DataLoader, { __call = function(_, ...) return new(...) end })
