-- Shares an epoch's stream of batches out over ranks, as Accelerate's
-- BatchSamplerShard does. An item is whatever the batches hold: sample
-- indices (sampler, batch_sampler) or samples (iterable data sets).
--
-- shard.group(next_item, size, drop_last) -> next_batch
--   Groups a stream of items into lists of `size` (the last one shorter,
--   or dropped with drop_last).
--
-- shard.rounds(next_batch, o) -> next_round
--   o = {world_size, split_batches, even_batches, drop_last, batch_size}
--   (batch_size nil when the batches' sizes are the user's, batch_sampler).
--   Each round is one step of every rank: {parts = {[r + 1] = list of items
--   for rank r, or nil when rank r has no batch in it}, padding =
--   {p_0, ..., p_(W-1)}}, p_r the items at the tail of rank r's part that
--   repeat earlier ones.
--   split_batches = false: rank r takes batches r, r + W, r + 2W, ... (one
--     round is W consecutive batches).
--   split_batches = true: each batch is a round, cut in W equal slices.
--   The last round may be incomplete (fewer than W batches, or a short
--   batch). drop_last: it is dropped. even_batches: it is completed with
--   items from the start of the epoch (cycled when the epoch is shorter
--   than a round), so every rank gets batch_size items (with user-sized
--   batches: a missing batch gets as many items as the epoch's first batch).
--   Otherwise the ranks without a batch in it get none.
local shard = {}

function shard.group(next_item, size, drop_last)
  local ended = false
  return function()
    if ended then return nil end
    local batch = {}
    while #batch < size do
      local item = next_item()
      if item == nil then
        ended = true
        break
      end
      batch[#batch + 1] = item
    end
    if #batch == 0 or (ended and drop_last and #batch < size) then return nil end
    return batch
  end
end

local function zeros(n)
  local out = {}
  for i = 1, n do out[i] = 0 end
  return out
end

local function copy(list)
  local out = {}
  for i, v in ipairs(list) do out[i] = v end
  return out
end

-- A function (list, count) appending `count` items of `initial`, cycling,
-- continuing where its previous call stopped.
local function cycler(initial)
  local cursor = 0
  return function(list, count)
    for _ = 1, count do
      list[#list + 1] = initial[cursor % #initial + 1]
      cursor = cursor + 1
    end
  end
end

local function rounds_of_batches(next_batch, o)
  local W, B = o.world_size, o.batch_size
  local initial, seen, done, first_size = {}, 0, false, nil
  return function()
    if done then return nil end
    local parts, n = {}, 0
    while n < W do
      local batch = next_batch()
      if batch == nil then break end
      n = n + 1
      parts[n] = batch
      seen = seen + 1
      first_size = first_size or #batch
      if seen <= W then
        for _, item in ipairs(batch) do initial[#initial + 1] = item end
      end
    end
    if n == W and (B == nil or #parts[W] == B) then return { parts = parts, padding = zeros(W) } end
    done = true
    if n == 0 or o.drop_last then return nil end
    local padding = zeros(W)
    if o.even_batches and #initial > 0 then
      local size, complete = B or first_size, cycler(initial)
      for r = 1, W do
        local part = parts[r] and copy(parts[r]) or {}
        local missing = (parts[r] and not B) and 0 or size - #part
        complete(part, missing)
        parts[r], padding[r] = part, missing
      end
    end
    return { parts = parts, padding = padding }
  end
end

local function split_rounds(next_batch, o)
  local W = o.world_size
  local initial, done = nil, false
  return function()
    if done then return nil end
    local batch = next_batch()
    if batch == nil then
      done = true
      return nil
    end
    initial = initial or copy(batch)
    local B = o.batch_size or #batch
    if B % W ~= 0 then
      error(string.format("DataLoader: split_batches needs every batch's size to be divisible by the "
                          .. "number of processes %d, got a batch of %d", W, B), 0)
    end
    local per_rank, real = B / W, #batch
    if real < B then
      done = true
      if o.drop_last then return nil end
      if o.even_batches then
        batch = copy(batch)
        cycler(initial)(batch, B - real)
      end
    end
    local parts, padding = {}, zeros(W)
    for r = 1, W do
      local first = (r - 1) * per_rank
      if first < #batch then
        local part = {}
        for i = first + 1, math.min(first + per_rank, #batch) do part[#part + 1] = batch[i] end
        parts[r] = part
        padding[r] = #part - math.max(0, math.min(per_rank, real - first))
      end
    end
    return { parts = parts, padding = padding }
  end
end

function shard.rounds(next_batch, o)
  if o.split_batches then return split_rounds(next_batch, o) end
  return rounds_of_batches(next_batch, o)
end

return shard
