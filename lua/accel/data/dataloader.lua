-- Batches of a data set, and once prepared, this rank's share of them:
--   local loader = data.DataLoader(dataset, {batch_size = 64, shuffle = true})
--   for x, y in loader:iter() do ... end     -- each iter() reads one epoch
--
-- Options: batch_size (1), shuffle (false), drop_last (false), seed
-- (default: accel.initial_seed() when the epoch starts),
-- collate (a Lua function from a list of samples, each the list of fields
-- get(i) returned, to the batch's values), num_workers (0: threads that
-- gather the next batches' rows in C++ ahead of the loop; built-in data
-- sets only, and the batches are exactly those of num_workers = 0),
-- sampler / batch_sampler (sampler.lua). The data set may also be iterable
-- (iterable_shard.lua): such loaders, those with a sampler and those with
-- dispatch_batches are read round by round (round_loop.lua).
-- Epoch e's order is the engine's permutation for seed + e (0-based e, the
-- same on every rank; see engine/data/epoch_plan.h); an iter() started
-- while the previous epoch is unfinished (the loop left with break) reads
-- the next epoch, as a new PyTorch iterator does. loader:set_epoch(e)
-- chooses the epoch the next iter() reads; loader.epoch is that epoch.
--
-- The interface the Accelerator uses:
--
-- loader:shard(rank, world_size, {even_batches = true, split_batches = false,
--              dispatch_batches = false, state = tbl})
--   Called by Accelerator:prepare: from then on this loader reads rank
--   `rank`'s share of every epoch. Rank r reads positions r, r + W, r + 2W,
--   ... of the epoch's order, so step k over all W ranks covers what one
--   process with a W times larger batch reads at its step k.
--   even_batches = true: every rank gets the same number of batches; the
--     order is padded by repeating samples from its start (at most one
--     sample per rank, the last row of its last batch). The last batch may
--     be smaller than batch_size but has the same size on every rank.
--   even_batches = false: no padding samples at all; a rank may have one
--     sample fewer than others, and so one batch fewer or a smaller last
--     batch.
--   split_batches = true: batch_size is the global batch; each rank reads
--     batch_size / world_size per step (an error names both numbers when
--     that does not divide), and each step covers the samples it covers
--     with split_batches = false and batch_size / world_size per rank.
--   drop_last: only whole batches, as many on every rank; never padding.
-- While an epoch is iterated the loader reports to `state`, a GradientState
-- (lua/accel/gradient_state.lua; the Accelerator's acc.gradient_state;
-- nothing is reported without one): iter() pushes the loader on its stack
-- of active loaders (unless the epoch has no batch left), each batch tells
-- it whether it is this rank's last of the epoch and the batch's padding,
-- and the end of the epoch (or set_epoch, load_state_dict, a new iter())
-- pops it, so a loader iterated inside another's loop leaves the outer
-- loader's facts current again. Read there:
--   state.active_loader: the innermost loader being iterated, or nil.
--   state.end_of_dataloader = true while that loader's last batch of the
--     epoch on this rank is current, false otherwise.
--   state.batch_padding = {p_0, ..., p_(W-1)}: how many rows at the tail of
--     each rank's current batch are padding duplicates; the same contents
--     on every rank (every rank computes it from n, W, B and the epoch's
--     padding). All 0 except in the last batch with even_batches; nil when
--     no batch is current.
-- loader:num_batches(): this rank's batches per epoch.
-- loader:total_batches(): the batches of all ranks together per epoch.
-- loader:state_dict() -> a plain table of numbers and booleans:
--   {epoch, batches_done_in_epoch, epoch_start, seed, world_size,
--    batch_size, dataset_size, shuffle, drop_last, even_batches}
--   epoch (0-based) is the epoch being read or read next;
--   batches_done_in_epoch counts the batches this loader has returned in it
--   (a batch counts once iter() has returned it), from list position
--   epoch_start (0 unless the epoch was itself resumed on another world
--   size); batch_size is per rank. With even_batches = false, rank 0 has
--   the most batches: save its state.
-- loader:load_state_dict(t) -> message or nil
--   Call after shard(). The next iter() continues epoch t.epoch after the
--   batches already read, which it skips by index arithmetic without
--   loading them; the epoch after it is t.epoch + 1. The seed is t.seed.
--   The samples already read over all ranks are the first
--   epoch_start + batches_done_in_epoch * batch_size * world_size of the
--   epoch's order; when the world size (or the per-rank batch size)
--   differs from the saved one, the rest of the epoch's order is shared
--   out again over the current ranks, so no sample is skipped or read
--   twice, and a message saying so is returned (and printed by rank 0).
--   Errors name the key when t is for another data set size or shuffle.
local core = require("accel.core")
local random = require("accel.util.random")
local field_checks = require("accel.util.field_checks")
local dataset_util = require("accel.data.dataset")
local default_collate = require("accel.data.collate")
local device_placement = require("accel.data.device_placement")
local iterable_shard = require("accel.data.iterable_shard")
local sampler = require("accel.data.sampler")
local round_loop = require("accel.data.round_loop")

local DataLoader = {}
DataLoader.__index = DataLoader

local known_options = { batch_size = true, shuffle = true, drop_last = true, seed = true,
                        collate = true, num_workers = true, sampler = true, batch_sampler = true }

local function check_type(options, key, kind)
  local v = options[key]
  if v ~= nil and type(v) ~= kind then
    error(string.format("data.DataLoader: %s must be a %s, got a %s", key, kind, type(v)), 3)
  end
end

local function count_option(options, key, default, minimum)
  local v = options[key]
  if v == nil then return default end
  if type(v) ~= "number" or v < minimum or v % 1 ~= 0 then
    error(string.format("data.DataLoader: %s must be an integer >= %d, got %s", key, minimum,
                        tostring(v)), 3)
  end
  return v
end

-- "map" (a length and get(i), read by the epoch plan), "iterable",
-- "sampler" or "batch_sampler" (read round by round, round_loop.lua).
local function loader_kind(dataset, options)
  if iterable_shard.is(dataset) then
    for _, key in ipairs({ "shuffle", "sampler", "batch_sampler" }) do
      if options[key] then
        error("data.DataLoader: " .. key .. " is not possible with an iterable data set (its order is "
              .. "the iterator's), as in PyTorch", 3)
      end
    end
    return "iterable"
  end
  dataset_util.check(dataset, "data.DataLoader", 3)
  if options.batch_sampler ~= nil then
    sampler.check(options.batch_sampler, "batch_sampler")
    for _, key in ipairs({ "batch_size", "shuffle", "sampler", "drop_last" }) do
      if options[key] ~= nil then
        error("data.DataLoader: batch_sampler is mutually exclusive with batch_size, shuffle, sampler "
              .. "and drop_last (got " .. key .. "), as in PyTorch", 3)
      end
    end
    return "batch_sampler"
  end
  if options.sampler ~= nil then
    sampler.check(options.sampler, "sampler")
    if options.shuffle then
      error("data.DataLoader: sampler is mutually exclusive with shuffle (the sampler gives the order), "
            .. "as in PyTorch", 3)
    end
    return "sampler"
  end
  return "map"
end

local function new(_, dataset, options)
  options = options or {}
  -- batch_size = false turns automatic batching off, as PyTorch's
  -- batch_size=None: each item the sampler gives is a batch's indices.
  if options.batch_size == false then
    if options.sampler == nil then
      error("data.DataLoader: batch_size = false needs a sampler that gives lists of indices", 2)
    end
    local copy = {}
    for k, v in pairs(options) do copy[k] = v end
    copy.batch_sampler, copy.sampler, copy.batch_size = options.sampler, nil, nil
    options = copy
  end
  for key in pairs(options) do
    if not known_options[key] then
      error("data.DataLoader: unknown option '" .. tostring(key) ..
            "' (known: batch_sampler, batch_size, collate, drop_last, num_workers, sampler, seed, shuffle)", 2)
    end
  end
  local kind = loader_kind(dataset, options)
  check_type(options, "shuffle", "boolean")
  check_type(options, "drop_last", "boolean")
  check_type(options, "collate", "function")
  local num_workers = count_option(options, "num_workers", 0, 0)
  if num_workers > 0 and kind ~= "map" then
    error(string.format("data.DataLoader: num_workers = %d needs a data set read in the loader's own order; "
                        .. "with %s use num_workers = 0", num_workers, kind == "iterable" and
                        "an iterable data set" or kind), 2)
  end
  if num_workers > 0 and not dataset_util.rows(dataset) then
    error(string.format("data.DataLoader: num_workers = %d needs a built-in data set (TensorDataset, "
                        .. "CSVDataset, TextDataset or a subset of one); a Lua data set is read on "
                        .. "the Lua thread, use num_workers = 0", num_workers), 2)
  end
  if options.seed ~= nil and (type(options.seed) ~= "number" or options.seed % 1 ~= 0) then
    error("data.DataLoader: seed must be an integer, got " .. tostring(options.seed), 2)
  end
  return setmetatable({
    dataset = dataset,
    kind = kind,
    sampler = options.sampler,
    batch_sampler = options.batch_sampler,
    batch_size = count_option(options, "batch_size", 1, 1),
    shuffle = options.shuffle or false,
    drop_last = options.drop_last or false,
    seed = options.seed,
    collate = options.collate,
    num_workers = num_workers,
    rank = 0,
    world_size = 1,
    even_batches = true,
    split_batches = false,
    dispatch_batches = false,
    state = nil,
    epoch = 0,             -- the epoch being read, or read next
    _start = 0,            -- list position where this loader's reading of the epoch began
    _batches_done = 0,     -- batches returned since _start
    _in_epoch = false,     -- an iter() of `epoch` has started and not finished
    _iteration = 0,        -- identifies the current iterator
    _prefetcher = nil,
    _total = 0,            -- batches of the epoch being iterated
    _dropped = {},         -- positions of the epoch a rollback dropped (_rewind)
    _rewinds = 0,          -- counts _rewind calls, which the iterator follows
  }, DataLoader)
end

local known_shard_options = { even_batches = true, split_batches = true, dispatch_batches = true, state = true }

function DataLoader:shard(rank, world_size, options)
  options = options or {}
  for key in pairs(options) do
    if not known_shard_options[key] then
      error("DataLoader:shard: unknown option '" .. tostring(key) ..
            "' (known: dispatch_batches, even_batches, split_batches, state)", 2)
    end
  end
  if type(world_size) ~= "number" or world_size < 1 or type(rank) ~= "number" or rank < 0
     or rank >= world_size then
    error(string.format("DataLoader:shard: rank %s is not in 0..%s", tostring(rank),
                        tostring(world_size and world_size - 1)), 2)
  end
  if options.split_batches and self.kind ~= "batch_sampler" and self.batch_size % world_size ~= 0 then
    error(string.format("DataLoader:shard: split_batches needs batch_size %d to be divisible by "
                        .. "the number of processes %d", self.batch_size, world_size), 2)
  end
  local state = options.state
  if state ~= nil and (type(state) ~= "table" or type(state._set_batch) ~= "function") then
    error("DataLoader:shard: state must be a GradientState (require(\"accel.gradient_state\")()), got a "
          .. type(state), 2)
  end
  if self.state and self.state ~= state then self.state:_remove_dataloader(self) end
  self.rank, self.world_size = rank, world_size
  self.even_batches = options.even_batches ~= false
  self.split_batches = options.split_batches or false
  self.dispatch_batches = options.dispatch_batches or false
  self.state = options.state
end

-- Rows each rank reads per step.
function DataLoader:rank_batch_size()
  if self.split_batches then return self.batch_size / self.world_size end
  return self.batch_size
end

function DataLoader:epoch_seed()
  return self.seed or random.initial_seed()
end

-- The epoch plan of a map-style loader, for this rank or rank `rank`.
function DataLoader:plan(epoch, start, rank)
  return core.data.EpochPlan({
    dataset_size = dataset_util.length(self.dataset),
    world_size = self.world_size,
    rank = rank or self.rank,
    batch_size = self:rank_batch_size(),
    shuffle = self.shuffle,
    seed = self:epoch_seed(),
    drop_last = self.drop_last,
    even_batches = self.even_batches,
    epoch = epoch,
    start = start,
  })
end

-- Batches of epoch 0 of each rank, as a list in rank order; a sampler's
-- epoch is walked (without loading the data) to count them.
function DataLoader:batches_per_rank()
  local counts = {}
  if self.kind == "iterable" then
    error("DataLoader: an iterable data set has no length; its number of batches is known once read", 3)
  elseif self.kind == "map" then
    local plan = self:plan(0, 0)
    for r = 1, self.world_size do counts[r] = plan:num_batches(r - 1) end
  else
    for r = 1, self.world_size do counts[r] = 0 end
    local next_round = sampler.rounds(self, 0)
    for round in next_round do
      for r = 1, self.world_size do
        if round.parts[r] then counts[r] = counts[r] + 1 end
      end
    end
  end
  return counts
end

function DataLoader:num_batches()
  return self:batches_per_rank()[self.rank + 1]
end

function DataLoader:total_batches()
  local total = 0
  for _, count in ipairs(self:batches_per_rank()) do total = total + count end
  return total
end

-- LuaJIT ignores __len on tables; with Lua 5.2 semantics #loader works.
DataLoader.__len = DataLoader.num_batches

function DataLoader:set_epoch(epoch)
  if type(epoch) ~= "number" or epoch < 0 or epoch % 1 ~= 0 then
    error("DataLoader:set_epoch: epoch must be an integer >= 0, got " .. tostring(epoch), 2)
  end
  self:close_prefetcher()
  self:leave_state()
  self.epoch, self._start, self._batches_done, self._in_epoch = epoch, 0, 0, false
end

-- This loader's epoch is no longer iterated: it leaves the GradientState's
-- stack (and so do loaders iterated inside it).
function DataLoader:leave_state()
  if self.state then self.state:_remove_dataloader(self) end
end

-- Also retires the current iterator, whose batches came from it.
function DataLoader:close_prefetcher()
  self._iteration = self._iteration + 1
  if self._prefetcher then
    self._prefetcher:close()
    self._prefetcher = nil
  end
end

function DataLoader:end_epoch()
  self:close_prefetcher()
  self.epoch, self._start, self._batches_done, self._in_epoch = self.epoch + 1, 0, 0, false
  self:leave_state()
end

-- A function k -> list of batch values, reading rows `rows` (0-based data
-- set indices) with B per batch.
function DataLoader:batch_reader(rows, batch_size, no_workers)
  local dataset, collate = self.dataset, self.collate
  local tensors, row_index = dataset_util.rows(dataset)
  local n = rows:numel()
  local function slice(k)
    local first = (k - 1) * batch_size
    return rows:narrow(1, first + 1, math.min(batch_size, n - first))
  end
  if not tensors then
    return function(k)
      local samples = {}
      for i, index in ipairs(slice(k):totable()) do
        samples[i] = { dataset:get(index + 1) }
        if samples[i][1] == nil then
          error(string.format("data.DataLoader: the data set's get(%d) returned nothing", index + 1), 0)
        end
      end
      return { (collate or default_collate)(samples) }
    end
  end
  if row_index then rows = core.data.take_rows({ row_index }, rows)[1] end
  local gather
  if self.num_workers > 0 and not no_workers then
    self._prefetcher = core.data.BatchPrefetcher(tensors, rows, batch_size, self.num_workers)
    local prefetcher = self._prefetcher
    gather = function() return prefetcher:next() end
  else
    gather = function(k) return core.data.take_rows(tensors, slice(k)) end
  end
  if not collate then return gather end
  -- A built-in data set's sample i is row i of each of its tensors.
  return function(k)
    local fields, samples = gather(k), {}
    for i = 1, fields[1]:size(1) do
      local sample = {}
      for f, t in ipairs(fields) do sample[f] = t[i] end
      samples[i] = sample
    end
    return { collate(samples) }
  end
end

-- The batches of the current epoch, on self.device when an Accelerator
-- prepared the loader for a GPU (device_placement.lua), else where the
-- data set keeps them.
function DataLoader:iter()
  local next_batch = self:host_iter()
  if self.device == nil or self.device == "cpu" then return next_batch end
  return device_placement.iterator(next_batch, self.device)
end

function DataLoader:host_iter()
  if self.kind ~= "map" or self.dispatch_batches then return round_loop(self) end
  self:close_prefetcher()
  if self._in_epoch then self:end_epoch() end
  self._in_epoch = true
  local iteration, state = self._iteration, self.state
  local plan = self:plan(self.epoch, self._start)
  local batch_size = self:rank_batch_size()
  local total = plan:num_batches()
  self._total, self._dropped = total, {}
  local k, first, read, rewinds
  -- Batches already read (after load_state_dict, or before a rollback's
  -- _rewind) are skipped by index.
  local function start_at(position)
    if self._prefetcher then self._prefetcher:close() end
    k, first, rewinds = position, position, self._rewinds
    read = self:batch_reader(plan:indices(first + 1), batch_size)
  end
  start_at(self._batches_done)
  -- The next batch to return after `after`, past those a rollback dropped.
  local function next_position(after)
    local n = after + 1
    while self._dropped[n] do n = n + 1 end
    return n
  end
  if state then
    if next_position(k) <= total then state:_add_dataloader(self) else state:_remove_dataloader(self) end
  end
  return function()
    local current = self._iteration == iteration
    if current and rewinds ~= self._rewinds then start_at(self._batches_done) end
    local n = next_position(k)
    if n > total then
      if current and self._in_epoch then self:end_epoch() end
      return nil
    end
    if not current then
      error("DataLoader: this iterator was ended by a later iter(), set_epoch() or load_state_dict()", 2)
    end
    -- A sequential reader (num_workers) reads the dropped batches it passes.
    while self._prefetcher and k + 1 < n do k = k + 1 read(k - first) end
    k = n
    local batch = read(k - first)
    self._batches_done = k
    if state then state:_set_batch(self, next_position(k) > total, plan:padding(k)) end
    return unpack(batch)
  end
end

-- Where a rollback may bring this loader back to (live/host_snapshots.lua):
-- the epoch and the batches read in it, or nil for a loader read round by
-- round (its data has no index to go back by). An epoch read to its end is
-- the start of the next.
function DataLoader:_position()
  if self.kind ~= "map" or self.dispatch_batches then return nil end
  if self._in_epoch and self._batches_done >= self._total then
    return { epoch = self.epoch + 1, done = 0, start = 0 }
  end
  return { epoch = self.epoch, done = self._batches_done, start = self._start }
end

-- A rollback: the epoch's reading goes back to `position` (a _position() of
-- this epoch) and the batches after `dropped_after` read so far are never
-- returned again (the spiked step's); the current iterator goes on from
-- there.
function DataLoader:_rewind(position, dropped_after)
  -- This epoch read to its end, and the position the next one's start.
  if position.epoch ~= self.epoch then return end
  if not self._in_epoch then
    self._batches_done = position.done
    return
  end
  for n = dropped_after + 1, self._batches_done do self._dropped[n] = true end
  self._batches_done = position.done
  self._rewinds = self._rewinds + 1
end

function DataLoader:state_dict()
  return {
    epoch = self.epoch,
    batches_done_in_epoch = self._batches_done,
    epoch_start = self._start,
    seed = self:epoch_seed(),
    world_size = self.world_size,
    batch_size = self:rank_batch_size(),
    -- An iterable data set's size is unknown: -1.
    dataset_size = self.kind == "iterable" and -1 or dataset_util.length(self.dataset),
    shuffle = self.shuffle,
    drop_last = self.drop_last,
    even_batches = self.even_batches,
  }
end

-- What state_dict writes, as load_state_dict checks it (field_checks.lua);
-- the checkpoint reader checks a loader file by it too, before anything
-- changes.
DataLoader.STATE_FIELDS = {
  { "epoch", "count" }, { "batches_done_in_epoch", "count" }, { "epoch_start", "count" }, { "seed", "integer" },
  { "world_size", "positive count" }, { "batch_size", "positive count" }, { "dataset_size", "size" },
  { "shuffle", "boolean" }, { "drop_last", "optional boolean" }, { "even_batches", "optional boolean" },
}

-- A loader read round by round resumes by reading the epoch's batches
-- already returned again (its data has no index to skip by), on the same
-- world size and batch size only.
function DataLoader:load_round_state(t)
  if t.world_size ~= self.world_size or t.batch_size ~= self:rank_batch_size() then
    error(string.format("DataLoader:load_state_dict: the state was saved on %d process(es) with batch_size "
                        .. "%d; a loader with %s resumes only on the same (here %d and %d)", t.world_size,
                        t.batch_size, self.kind == "iterable" and "an iterable data set" or self.kind,
                        self.world_size, self:rank_batch_size()), 3)
  end
  self:close_prefetcher()
  self.epoch, self._in_epoch, self._start, self._batches_done = t.epoch, false, 0, t.batches_done_in_epoch
  return nil
end

function DataLoader:load_state_dict(t)
  field_checks.check(t, DataLoader.STATE_FIELDS, "DataLoader:load_state_dict")
  if self.kind ~= "map" then return self:load_round_state(t) end
  local n = dataset_util.length(self.dataset)
  if t.dataset_size ~= n then
    error(string.format("DataLoader:load_state_dict: 'dataset_size' is %d, but this loader's data set "
                        .. "has %d samples", t.dataset_size, n), 2)
  end
  if t.shuffle ~= self.shuffle then
    error(string.format("DataLoader:load_state_dict: 'shuffle' is %s, but this loader has shuffle = %s",
                        tostring(t.shuffle), tostring(self.shuffle)), 2)
  end
  self:close_prefetcher()
  self:leave_state()
  self.seed, self.epoch, self._in_epoch = t.seed, t.epoch, false
  local batch_size = self:rank_batch_size()
  if t.world_size == self.world_size and t.batch_size == batch_size then
    self._start, self._batches_done = t.epoch_start, t.batches_done_in_epoch
    return nil
  end
  local read = math.min(n, t.epoch_start + t.batches_done_in_epoch * t.batch_size * t.world_size)
  self._start, self._batches_done = read, 0
  local function processes(count) return count .. (count == 1 and " process" or " processes") end
  local message = string.format(
    "DataLoader: epoch %d was saved on %s at %d samples per batch, and resumes on %s at %d: "
      .. "the %d of its %d samples not yet read are re-sharded",
    t.epoch, processes(t.world_size), t.batch_size, processes(self.world_size), batch_size, n - read, n)
  if self.rank == 0 then print(message) end
  return message
end

return setmetatable(DataLoader, { __call = new })
