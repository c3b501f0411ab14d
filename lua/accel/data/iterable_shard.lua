-- Iterable data sets: a Lua iterator function, read once, or a table with
-- iter() (called every epoch) and no length. Every rank walks the stream
-- and keeps its slice of each global batch, as Accelerate's
-- IterableDatasetShard does (the slicing is batch_sampler_shard.lua's, over
-- batches of samples).
local shard = require("accel.data.batch_sampler_shard")

local iterable_shard = {}

-- Whether `ds` is an iterable data set rather than one read by get(i).
function iterable_shard.is(ds)
  if type(ds) == "function" then return true end
  -- A length does not make it a map-style data set: only get(i) does (a
  -- length beside iter() is a hint, as for PyTorch's IterableDataset).
  return type(ds) == "table" and type(ds.iter) == "function" and type(ds.get) ~= "function"
end

-- A function giving the epoch's next sample (the list of the values the
-- iterator returned), nil at the end.
local function samples(loader, epoch)
  local ds = loader.dataset
  local step, state, control
  if type(ds) == "function" then
    if loader._stream_read then
      error("data.DataLoader: the iterator function given as data set was already read to its end; "
            .. "give a table with iter() to read the data every epoch", 0)
    end
    loader._stream_read = true
    step = ds
  else
    step, state, control = ds:iter(epoch)
    if type(step) ~= "function" then
      error("data.DataLoader: the data set's iter() returned a " .. type(step) .. ", expected an iterator function", 0)
    end
  end
  return function()
    local values = { step(state, control) }
    control = values[1]
    if control == nil then return nil end
    return values
  end
end

-- The epoch's rounds (see batch_sampler_shard.lua); an item is a sample.
function iterable_shard.rounds(loader, epoch)
  return shard.rounds(shard.group(samples(loader, epoch), loader.batch_size, loader.drop_last), {
    world_size = loader.world_size,
    split_batches = loader.split_batches,
    even_batches = loader.even_batches and loader.world_size > 1,
    drop_last = loader.drop_last,
    batch_size = loader.batch_size,
  })
end

return iterable_shard
