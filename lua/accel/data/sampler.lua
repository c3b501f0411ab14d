-- The DataLoader's `sampler` and `batch_sampler` options: where each
-- epoch's sample indices (1-based) come from. Either option is a
-- function(epoch) or a table with iter(epoch) returning a list or an
-- iterator function, or a fixed list. `sampler` gives indices, which the
-- loader groups by batch_size; `batch_sampler` gives lists of indices, one
-- per batch. epoch is 0-based; every rank must get the same indices, so a
-- random order is drawn from a generator seeded with the epoch.
local dataset_util = require("accel.data.dataset")
local shard = require("accel.data.batch_sampler_shard")

local sampler = {}

function sampler.check(value, key)
  local kind = type(value)
  if kind ~= "function" and kind ~= "table" then
    error(string.format("data.DataLoader: %s must be a function(epoch), a table with iter(epoch) or a list, "
                        .. "got a %s", key, kind), 3)
  end
end

local function stream_of(produced, key)
  if type(produced) == "table" then
    local i = 0
    return function()
      i = i + 1
      return produced[i]
    end
  end
  if type(produced) == "function" then return produced end
  error(string.format("data.DataLoader: %s must give a list or an iterator function, got a %s", key,
                      type(produced)), 0)
end

local function epoch_stream(source, epoch, key)
  if type(source) == "function" then return stream_of(source(epoch), key) end
  if type(source.iter) == "function" then return stream_of(source:iter(epoch), key) end
  return stream_of(source, key)
end

local function checked(index, n, key)
  if type(index) ~= "number" or index % 1 ~= 0 or index < 1 or index > n then
    error(string.format("data.DataLoader: %s gave the index %s; the data set's indices are 1..%d", key,
                        tostring(index), n), 0)
  end
  return index
end

-- A function giving the epoch's next batch (a list of indices), nil at the end.
function sampler.batches(loader, epoch)
  local n = dataset_util.length(loader.dataset)
  if loader.batch_sampler then
    local next_batch = epoch_stream(loader.batch_sampler, epoch, "batch_sampler")
    return function()
      local batch = next_batch()
      if batch == nil then return nil end
      if type(batch) ~= "table" or #batch == 0 then
        error("data.DataLoader: batch_sampler gave a " .. type(batch) .. " (or an empty list), expected "
              .. "a list of indices", 0)
      end
      for _, index in ipairs(batch) do checked(index, n, "batch_sampler") end
      return batch
    end
  end
  local next_index = epoch_stream(loader.sampler, epoch, "sampler")
  return shard.group(function()
    local index = next_index()
    return index ~= nil and checked(index, n, "sampler") or nil
  end, loader.batch_size, loader.drop_last)
end

-- The epoch's rounds (see batch_sampler_shard.lua); an item is an index.
function sampler.rounds(loader, epoch)
  return shard.rounds(sampler.batches(loader, epoch), {
    world_size = loader.world_size,
    split_batches = loader.split_batches,
    even_batches = loader.even_batches and loader.world_size > 1,
    drop_last = loader.drop_last,
    batch_size = not loader.batch_sampler and loader.batch_size or nil,
  })
end

return sampler
