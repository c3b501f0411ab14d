-- The epoch iterator of a loader read round by round (see rounds.lua):
-- reads one batch ahead, so that the state says end_of_dataloader on the
-- last batch even when the data's end is only known by reaching it
-- (iterable data sets). With dispatch_batches the rounds come from the
-- main process (dispatcher.lua).
local dispatcher = require("accel.data.dispatcher")
local rounds = require("accel.data.rounds")

-- A function giving this rank's next step ({values, padding}) of the epoch.
local function local_pull(loader, epoch)
  local next_round, read_part = rounds(loader, epoch)
  local rank = loader.rank
  return function()
    local round = next_round()
    if round == nil then return nil end
    local part = round.parts[rank + 1]
    return { values = part and read_part(part), padding = round.padding }
  end
end

return function(loader)
  loader:close_prefetcher()
  if loader._in_epoch then loader:end_epoch() end
  loader._in_epoch = true
  local iteration, state, epoch = loader._iteration, loader.state, loader.epoch
  local pull
  if loader.dispatch_batches then
    pull = dispatcher.pull(loader, function() return rounds(loader, epoch) end)
  else
    pull = local_pull(loader, epoch)
  end
  -- Rounds without a batch for this rank only end an epoch (even_batches = false).
  local function next_batch()
    local step = pull()
    while step and not step.values do step = pull() end
    return step
  end
  local k = loader._batches_done
  -- Batches already read (after load_state_dict) are read again and dropped.
  for _ = 1, k do next_batch() end
  local current = next_batch()
  if state then
    if current then state:_add_dataloader(loader) else state:_remove_dataloader(loader) end
  end
  return function()
    if current == nil then
      if loader._iteration == iteration and loader._in_epoch then loader:end_epoch() end
      return nil
    end
    if loader._iteration ~= iteration then
      error("DataLoader: this iterator was ended by a later iter(), set_epoch() or load_state_dict()", 2)
    end
    local step = current
    current = next_batch()
    k = k + 1
    loader._batches_done = k
    if state then state:_set_batch(loader, current == nil, step.padding) end
    return unpack(step.values)
  end
end
