-- DataLoader and data sets on one rank: exact batches with and without
-- shuffling, drop_last, collate, Lua data sets, Subset and random_split,
-- background workers, the iteration state the Accelerator reads, and
-- resuming an epoch from a state_dict.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local data = accel.data

-- Every batch of one epoch, each as a Lua table of values.
local function epoch_of(loader)
  local out = {}
  for x in loader:iter() do out[#out + 1] = x:totable() end
  return out
end

local function same(a, b, what)
  check.equal(#a, #b, what .. ": batch count")
  for i = 1, #a do check.near(a[i], b[i], 0, what .. ": batch " .. i) end
end

local ids = accel.arange(10)  -- sample i holds i - 1

-- No shuffle: batches in order, the last one short; drop_last drops it.
same(epoch_of(data.DataLoader(data.TensorDataset(ids), { batch_size = 4 })),
     { { 0, 1, 2, 3 }, { 4, 5, 6, 7 }, { 8, 9 } }, "sequential")
same(epoch_of(data.DataLoader(data.TensorDataset(ids), { batch_size = 4, drop_last = true })),
     { { 0, 1, 2, 3 }, { 4, 5, 6, 7 } }, "drop_last")
check.equal(data.DataLoader(data.TensorDataset(ids), { batch_size = 4 }):num_batches(), 3, "num_batches")
check.equal(data.DataLoader(data.TensorDataset(ids), { batch_size = 4, drop_last = true }):num_batches(), 2,
            "num_batches with drop_last")

-- Shuffled: epoch e is PyTorch's randperm(n) for a generator seeded with
-- seed + e (values printed by python3-torch 1.13.1, as in test_sampler.cpp).
local shuffled = data.DataLoader(data.TensorDataset(ids), { batch_size = 4, shuffle = true, seed = 0 })
same(epoch_of(shuffled), { { 4, 1, 7, 5 }, { 3, 9, 0, 8 }, { 6, 2 } }, "shuffled epoch 0")
check.equal(shuffled.epoch, 1, "the next iter() reads epoch 1")
local second = epoch_of(shuffled)
check.truthy(second[1][1] ~= 4 or second[1][2] ~= 1 or second[1][3] ~= 7, "epoch 1 is reshuffled")
local thirteen = data.DataLoader(data.TensorDataset(accel.arange(13)), { batch_size = 13, shuffle = true, seed = 42 })
thirteen:set_epoch(3)
same(epoch_of(thirteen), { { 7, 3, 2, 11, 10, 12, 0, 8, 1, 9, 4, 6, 5 } }, "seed 42, epoch 3")

-- The seed defaults to the one given to accel.set_seed, read when the
-- epoch starts rather than when the loader is made.
accel.set_seed(0)
thirteen = data.DataLoader(data.TensorDataset(accel.arange(13)), { batch_size = 13, shuffle = true })
accel.set_seed(42)
thirteen:set_epoch(3)
same(epoch_of(thirteen), { { 7, 3, 2, 11, 10, 12, 0, 8, 1, 9, 4, 6, 5 } }, "accel.set_seed(42)")
check.equal(thirteen:state_dict().seed, 42, "the state records the seed in force")

-- Several tensors: rows stay aligned.
do
  local x = accel.arange(20):view(10, 2)
  local loader = data.DataLoader(data.TensorDataset(x, ids * 10), { batch_size = 3, shuffle = true, seed = 3 })
  for xb, yb in loader:iter() do
    check.near(xb:select(2, 1), yb / 5, 0, "row of x matches row of y")
  end
end

-- A collate function gets the samples (each the list of get(i)'s values)
-- and its return values are the batch.
do
  local seen
  local loader = data.DataLoader(data.TensorDataset(ids, ids * 2), {
    batch_size = 3,
    collate = function(samples)
      seen = samples
      local sum = 0
      for _, s in ipairs(samples) do sum = sum + s[1]:item() + s[2]:item() end
      return sum, #samples
    end,
  })
  local sums, sizes = {}, {}
  for sum, size in loader:iter() do sums[#sums + 1], sizes[#sizes + 1] = sum, size end
  check.near(sums, { 9, 36, 63, 27 }, 0, "collate sums (x + 2x of each batch)")
  check.near(sizes, { 3, 3, 3, 1 }, 0, "collate batch sizes")
  check.equal(#seen[1], 2, "a sample holds both fields")
end

-- A data set written in Lua: __len and get(i); the default collate stacks
-- tensors (an int64 scalar per sample gives int64 ids), makes numbers a
-- float32 tensor, keeps strings and collates tables by key.
local Squares = {}
Squares.__index = Squares
Squares.__len = function(self) return self.n end
function Squares:get(i)
  return accel.full({ 2 }, i), i * i, "s" .. i, { id = accel.tensor(i, { dtype = accel.int64 }), half = i / 2 }
end
do
  local squares = setmetatable({ n = 7 }, Squares)
  local loader = data.DataLoader(squares, { batch_size = 3, shuffle = true, seed = 0 })
  local count, all = 0, {}
  for pair, square, names, info in loader:iter() do
    count = count + 1
    check.equal(pair.dtype, "float32", "stacked tensors keep their dtype")
    check.equal(square.dtype, "float32", "integral numbers become float32, as accel.tensor makes them")
    check.equal(info.id.dtype, "int64", "int64 scalar tensors stack to int64 ids")
    check.near(square, (info.id * info.id):totable(), 0, "fields of one sample stay together")
    check.near(pair:select(2, 1), info.id:float(), 0, "tensor field is the sample's")
    check.near(info.half, info.id:double() / 2, 0, "a table field is collated by key")
    for k, name in ipairs(names) do
      check.equal(name, "s" .. info.id[k]:item(), "strings stay a list")
      all[#all + 1] = info.id[k]:item()
    end
  end
  check.equal(count, 3, "7 samples at 3 per batch")
  table.sort(all)
  check.near(all, { 1, 2, 3, 4, 5, 6, 7 }, 0, "every Lua sample once")
  check.raises(function() data.DataLoader(squares, { num_workers = 2 }) end,
               "workers need a built-in data set", "num_workers = 2", "built-in data set")
end

-- Construction errors name the option.
check.raises(function() data.DataLoader(data.TensorDataset(ids), { batchsize = 4 }) end,
             "unknown option", "batchsize")
check.raises(function() data.DataLoader(data.TensorDataset(ids), { batch_size = 0 }) end,
             "batch_size", "batch_size", "got 0")
check.raises(function() data.DataLoader({}, {}) end, "not a data set", "__len")

-- Subset and random_split share the parent's storage.
do
  local x = accel.arange(10) * 1
  local ds = data.TensorDataset(x)
  local sub = data.Subset(ds, { 3, 1, 2 })
  check.equal(accel.data.DataLoader(sub, {}):num_batches(), 3, "subset length")
  check.near(sub:get(1), 2, 0, "subset sample 1 is the parent's sample 3")
  x[3] = 100
  check.near(sub:get(1), 100, 0, "a subset shares the parent's storage")
  x[3] = 2
  same(epoch_of(data.DataLoader(data.Subset(sub, { 3, 1 }), { batch_size = 2 })), { { 1, 2 } },
       "a subset of a subset is read by rows")
  check.raises(function() data.Subset(ds, { 1, 11 }) end, "subset index out of range", "index 2 is 11", "1..10")

  -- PyTorch: random_split(range(10), [3, 7], generator=torch.Generator().manual_seed(0))
  -- -> [4, 1, 7] and [5, 3, 9, 0, 8, 6, 2]
  local parts = data.random_split(ds, { 3, 7 }, { seed = 0 })
  same(epoch_of(data.DataLoader(parts[1], { batch_size = 10 })), { { 4, 1, 7 } }, "random_split part 1")
  same(epoch_of(data.DataLoader(parts[2], { batch_size = 10 })), { { 5, 3, 9, 0, 8, 6, 2 } }, "random_split part 2")
  local fractions = data.random_split(data.TensorDataset(accel.arange(11)), { 0.5, 0.3, 0.2 }, { seed = 4 })
  local union = {}
  for i, expected in ipairs({ 6, 3, 2 }) do
    local batches = epoch_of(data.DataLoader(fractions[i], { batch_size = 11 }))
    check.equal(#batches[1], expected, "fraction part " .. i .. " (11 * 0.5 floored, remainder to the first)")
    for _, v in ipairs(batches[1]) do union[#union + 1] = v end
  end
  table.sort(union)
  check.near(union, accel.arange(11):totable(), 0, "the parts partition the data set")
  local lua_parts = data.random_split(setmetatable({ n = 7 }, Squares), { 4, 3 }, { seed = 1 })
  local _, lua_square = lua_parts[2]:get(1)
  check.truthy(lua_square >= 1, "a split of a Lua data set reads through get")
  local all_and_none = data.random_split(ds, { 10, 0 })
  check.equal(data.DataLoader(all_and_none[2], {}):num_batches(), 0, "an empty part")
  check.equal(#epoch_of(data.DataLoader(all_and_none[2], {})), 0, "an empty part reads no batch")
  check.raises(function() data.random_split(ds, { 3, 3 }) end, "bad lengths", "sum to 6", "10 samples")
end

-- Background workers give exactly the batches of num_workers = 0, for
-- tensors, subsets (a row index) and a collate function.
do
  local x, y = accel.randn(103, 3), accel.arange(103)
  local ds = data.TensorDataset(x, y)
  local sub = data.random_split(ds, { 0.7, 0.3 }, { seed = 2 })[1]
  local function plain(v)
    if type(v) == "userdata" then return v:totable() end
    return v
  end
  local function batches(dataset, options)
    local loader, out = data.DataLoader(dataset, options), {}
    for _ = 1, 2 do
      for a, b in loader:iter() do out[#out + 1] = { plain(a), plain(b) } end
    end
    return out
  end
  for _, workers in ipairs({ 1, 3 }) do
    for _, case in ipairs({ { ds, {} }, { sub, { drop_last = true } },
                            { ds, { collate = function(s) return #s, s[1][2] end } } }) do
      local options = { batch_size = 8, shuffle = true, seed = 9 }
      for k, v in pairs(case[2]) do options[k] = v end
      local serial = batches(case[1], options)
      options.num_workers = workers
      local threaded = batches(case[1], options)
      check.equal(#threaded, #serial, "workers: batch count")
      for i = 1, #serial do
        check.near(threaded[i][1], serial[i][1], 0, "workers " .. workers .. ": batch " .. i)
        check.near(threaded[i][2], serial[i][2], 0, "workers " .. workers .. ": batch " .. i .. " field 2")
      end
    end
  end
  -- Leaving a loop early and starting again reads the next epoch.
  local loader = data.DataLoader(ds, { batch_size = 10, shuffle = true, seed = 1, num_workers = 2 })
  for _ in loader:iter() do break end
  check.equal(loader.epoch, 0, "still in epoch 0 after break")
  local reference = data.DataLoader(ds, { batch_size = 10, shuffle = true, seed = 1 })
  reference:set_epoch(1)
  local next_batch = loader:iter()
  check.near(next_batch(), reference:iter()(), 0, "iter() after break reads epoch 1")
  loader:set_epoch(0)
  check.raises(next_batch, "an iterator outlived by set_epoch", "ended by a later iter(), set_epoch()")

  -- Loaders left in the middle of an epoch (kept alive, as an Accelerator
  -- keeps prepared ones for checkpoints) hold no threads once their
  -- workers have waited a second for room.
  local function threads()
    local f = assert(io.open("/proc/self/status"))
    local n = tonumber(f:read("*a"):match("\nThreads:%s*(%d+)"))
    f:close()
    return n
  end
  local before, kept = threads(), {}
  for i = 1, 50 do
    kept[i] = data.DataLoader(ds, { batch_size = 10, num_workers = 2 })
    for _ in kept[i]:iter() do break end
  end
  local after = threads()
  local deadline = os.time() + 10
  while after > before and os.time() < deadline do
    os.execute("sleep 0.2")
    after = threads()
  end
  check.equal(after <= before, true, "threads after 50 loaders left mid-epoch: " .. after .. ", before " .. before)
  check.near(kept[1]:iter()(), data.DataLoader(ds, { batch_size = 10 }):iter()(), 0,
             "a left loader reads its next epoch")
end

-- The state a prepared loader writes for the Accelerator (one rank).
do
  local state = require("accel.gradient_state")()
  local loader = data.DataLoader(data.TensorDataset(ids), { batch_size = 4 })
  loader:shard(0, 1, { state = state })
  local seen = {}
  for x in loader:iter() do
    check.equal(state.active_loader, loader, "active_loader while iterating")
    seen[#seen + 1] = tostring(state.end_of_dataloader)
    check.near(state.batch_padding, { 0 }, 0, "no padding on one rank")
  end
  check.equal(table.concat(seen, " "), "false false true", "end_of_dataloader on the last batch only")
  check.equal(state.active_loader, nil, "no active loader after the epoch")
  check.equal(state.end_of_dataloader, false, "end_of_dataloader reset after the epoch")
  check.equal(state.batch_padding, nil, "no current batch after the epoch")
  check.raises(function() loader:shard(0, 3, { split_batches = true }) end, "split_batches divisibility",
               "batch_size 4", "processes 3")
  check.raises(function() loader:shard(0, 2, { evenbatches = false }) end, "unknown shard option", "evenbatches")
end

-- Resuming: a loader that loads a state saved mid-epoch reads exactly the
-- rest of the uninterrupted run, without loading the skipped batches.
do
  local reads = 0
  local Counted = { __len = function() return 23 end }
  Counted.__index = Counted
  function Counted:get(i)
    reads = reads + 1
    return i
  end
  local function run(options, stop_after)
    local loader = data.DataLoader(setmetatable({}, Counted), options)
    local out = {}
    for _ = 1, 2 do
      for x in loader:iter() do
        out[#out + 1] = x:totable()
        if stop_after and #out == stop_after then return out, loader:state_dict() end
      end
    end
    return out
  end
  for _, stop in ipairs({ 1, 3, 5, 6 }) do
    local options = { batch_size = 4, shuffle = true, seed = 7 }
    local full = run(options)
    local head, saved = run(options, stop)
    local resumed = data.DataLoader(setmetatable({}, Counted), options)
    check.equal(resumed:load_state_dict(saved), nil, "same world: no message")
    reads = 0
    local tail = {}
    for _ = 1, 2 do
      for x in resumed:iter() do tail[#tail + 1] = x:totable() end
      if #head + #tail == #full then break end
    end
    -- 23 samples at 4 per batch: 6 batches, the last one of 3.
    local rest_of_epoch = stop < 6 and 23 - 4 * stop or 0
    check.equal(reads, rest_of_epoch + 23, "skipped batches are not loaded (stop " .. stop .. ")")
    for _, batch in ipairs(tail) do head[#head + 1] = batch end
    same(head, full, "resumed after " .. stop .. " batches")
  end
  -- The state of a finished epoch points at the next one.
  local loader = data.DataLoader(data.TensorDataset(ids), { batch_size = 4 })
  epoch_of(loader)
  local t = loader:state_dict()
  check.equal(t.epoch, 1, "state after an epoch: next epoch")
  check.equal(t.batches_done_in_epoch, 0, "state after an epoch: no batch done")
  check.raises(function() data.DataLoader(data.TensorDataset(accel.arange(9)), {}):load_state_dict(t) end,
               "another data set", "'dataset_size' is 10", "has 9")
  t.shuffle = true
  check.raises(function() loader:load_state_dict(t) end, "shuffle differs", "'shuffle' is true")
end

-- Re-sharding, simulated in one process: ranks 0..W-1 are W loaders.
-- Samples read before the save (over all saved ranks) and after the load
-- (over all new ranks, padding dropped) are every sample exactly once.
do
  local function read_ranks(n, world, batch, state, stop)
    local got, saved = {}, nil
    for r = 0, world - 1 do
      local st = require("accel.gradient_state")()
      local loader = data.DataLoader(data.TensorDataset(accel.arange(n)), { batch_size = batch, shuffle = true, seed = 5 })
      loader:shard(r, world, { state = st })
      local message
      if state then message = loader:load_state_dict(state) end
      local k = 0
      for x in loader:iter() do
        k = k + 1
        local rows = x:totable()
        for i = 1, #rows - st.batch_padding[r + 1] do got[#got + 1] = rows[i] end
        if stop and k == stop then
          if r == 0 then saved = loader:state_dict() end
          break
        end
      end
      if state and r == 0 then
        check.truthy(message and message:find("re%-sharded"), "re-sharding is reported")
      end
    end
    return got, saved
  end
  for _, case in ipairs({ { 3, 2, 2 }, { 2, 1, 3 }, { 1, 2, 1 }, { 2, 2, 3 } }) do
    local from, to, stop = case[1], case[2], case[3]
    for n = 9, 17, 4 do
      local before, saved = read_ranks(n, from, 2, nil, stop)
      local after = read_ranks(n, to, from == to and 3 or 2, saved)
      local count = {}
      for _, v in ipairs(before) do count[v] = (count[v] or 0) + 1 end
      for _, v in ipairs(after) do count[v] = (count[v] or 0) + 1 end
      for v = 0, n - 1 do
        check.equal(count[v], 1, string.format("world %d -> %d, n = %d: sample %d read once", from, to, n, v))
      end
    end
  end
end

check.done("test_data")
