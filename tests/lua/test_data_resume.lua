-- nproc: 3
-- Resuming a prepared loader from its state_dict on real ranks (Gloo):
-- on the same world size, the resumed run's batches (and the state it
-- writes for the Accelerator) equal the uninterrupted run's, with and
-- without background workers; saved on 2 ranks and resumed on 3, the rest
-- of the epoch is re-sharded so that no sample is skipped or read twice.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local data = accel.data
local dist = require("accel.core").dist

local W, rank = dist.state().world_size, dist.state().rank
dist.init()
check.equal(W, 3, "three ranks")

local function loader_for(n, batch_size, world, r, workers)
  local state = require("accel.gradient_state")()
  local loader = data.DataLoader(data.TensorDataset(accel.arange(n)),
                                 { batch_size = batch_size, shuffle = true, seed = 3, num_workers = workers })
  loader:shard(r, world, { state = state })
  return loader, state
end

-- Batches (ids, padding table, end flag) until `stop` batches or `epochs` end.
local function read(loader, state, epochs, stop)
  local out = {}
  for _ = 1, epochs do
    for x in loader:iter() do
      out[#out + 1] = { x:totable(), state.batch_padding, state.end_of_dataloader and 1 or 0 }
      if #out == stop then return out end
    end
  end
  return out
end

-- Same world size: interrupted after `stop` batches and resumed in a new
-- loader, the batches read equal the uninterrupted run's.
for _, workers in ipairs({ 0, 2 }) do
  for _, n in ipairs({ 14, 17 }) do
    for _, stop in ipairs({ 1, 2, 3 }) do
      local what = string.format("workers=%d n=%d stop=%d", workers, n, stop)
      local reference, reference_state = loader_for(n, 2, W, rank, workers)
      reference:set_epoch(1)
      local full = read(reference, reference_state, 2)
      local first, first_state = loader_for(n, 2, W, rank, workers)
      first:set_epoch(1)
      local head = read(first, first_state, 2, stop)
      local saved = first:state_dict()
      check.equal(saved.epoch, 1, what .. ": saved epoch")
      check.equal(saved.batches_done_in_epoch, stop, what .. ": saved batches")
      local resumed, resumed_state = loader_for(n, 2, W, rank, workers)
      check.equal(resumed:load_state_dict(saved), nil, what .. ": same world, nothing re-sharded")
      local tail = read(resumed, resumed_state, 2)
      check.equal(#head + #tail, #full, what .. ": batch count")
      for i = 1, #full do
        local got = i <= #head and head[i] or tail[i - #head]
        check.near(got, full[i], 0, what .. ": batch " .. i .. " with its padding and end flag")
      end
      check.equal(resumed.epoch, 3, what .. ": two epochs done")
    end
  end
end

-- Saved on 2 ranks, resumed on 3. Every process replays both world-2
-- ranks up to the save (the ids they read are known everywhere); the 3 real
-- ranks then read the rest, and all ids read are each sample exactly once.
for _, n in ipairs({ 10, 13, 17 }) do
  for _, stop in ipairs({ 1, 2 }) do
    local what = string.format("2 -> 3 ranks, n=%d stop=%d", n, stop)
    local count, saved = {}, nil
    for r = 0, 1 do
      local loader, state = loader_for(n, 2, 2, r, 0)
      loader:set_epoch(4)
      for _, b in ipairs(read(loader, state, 1, stop)) do
        for i = 1, #b[1] - b[2][r + 1] do count[b[1][i]] = (count[b[1][i]] or 0) + 1 end
      end
      if r == 0 then saved = loader:state_dict() end
    end
    local loader, state = loader_for(n, 2, W, rank, 2)
    local message = loader:load_state_dict(saved)
    check.truthy(message and message:find("saved on 2 processes", 1, true) and message:find("resumes on 3", 1, true),
                 what .. ": the re-sharding is reported")
    local mine = {}
    for _, b in ipairs(read(loader, state, 1)) do
      for i = 1, #b[1] - b[2][rank + 1] do mine[#mine + 1] = b[1][i] end
    end
    check.equal(loader.epoch, 5, what .. ": the resumed epoch ends, the next one follows")
    local slots = {}
    for i = 1, n do slots[i] = mine[i] or -1 end
    for _, t in ipairs(dist.all_gather(accel.tensor(slots, { dtype = accel.int64 }))) do
      for _, id in ipairs(t:totable()) do
        if id >= 0 then count[id] = (count[id] or 0) + 1 end
      end
    end
    for id = 0, n - 1 do check.equal(count[id], 1, what .. ": sample " .. id .. " read once") end
  end
end

check.done("test_data_resume")
