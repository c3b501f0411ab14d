-- One epoch of a loader as rounds (one step of every rank; see
-- batch_sampler_shard.lua), for the loaders read round by round: iterable
-- data sets, `sampler` / `batch_sampler`, and dispatch_batches. Returns
-- next_round and load(part) -> the list of the batch's values.
local core = require("accel.core")
local default_collate = require("accel.data.collate")
local iterable_shard = require("accel.data.iterable_shard")
local sampler = require("accel.data.sampler")

-- A map-style loader's epoch plan, walked for every rank (for
-- dispatch_batches, where the main process reads every rank's batches).
local function plan_rounds(loader, epoch)
  local W, B = loader.world_size, loader:rank_batch_size()
  local rows, counts = {}, {}
  local plan
  for r = 1, W do
    plan = loader:plan(epoch, loader._start, r - 1)
    rows[r], counts[r] = plan:indices(1), plan:num_batches()
  end
  local k = 0
  return function()
    k = k + 1
    local parts, any = {}, false
    for r = 1, W do
      if k <= counts[r] then
        local first = (k - 1) * B
        local part = rows[r]:narrow(1, first + 1, math.min(B, rows[r]:numel() - first)):totable()
        for i, row in ipairs(part) do part[i] = row + 1 end
        parts[r], any = part, true
      end
    end
    if not any then return nil end
    return { parts = parts, padding = plan:padding(k) }
  end
end

return function(loader, epoch)
  if loader.kind == "iterable" then
    local collate = loader.collate or default_collate
    return iterable_shard.rounds(loader, epoch), function(samples) return { collate(samples) } end
  end
  local next_round = loader.kind == "map" and plan_rounds(loader, epoch) or sampler.rounds(loader, epoch)
  return next_round, function(indices)
    local rows = {}  -- 0-based; the list may be the user's batch_sampler's own
    for i, index in ipairs(indices) do rows[i] = index - 1 end
    return loader:batch_reader(core.tensor(rows, { dtype = "int64" }), #rows, true)(1)
  end
end
