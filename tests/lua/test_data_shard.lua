-- nproc: 2 3
-- Sharding over real ranks (Gloo): for every data set size 1..13, with and
-- without drop_last, even_batches and split_batches, every rank's batches
-- are gathered and checked together: each sample read exactly once (only
-- whole global batches with drop_last) plus exactly the padding reported in
-- state.batch_padding, the same padding table on every rank, step k over
-- all ranks reading one process's batch k at a W times larger batch, and
-- split_batches reading what the per-rank batch size reads.
-- It runs at 2 and 3 ranks (`-- nproc: 2 3`).
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local data = accel.data
local dist = require("accel.core").dist

local W, rank = dist.state().world_size, dist.state().rank
dist.init()
local B = 2           -- samples per rank per step
local SLOTS = 512     -- room for one rank's encoded epoch

-- One epoch as {batches = {{ids = {...}, padding = {...}, last = bool}, ...}}.
local function read_epoch(loader, state)
  local batches = {}
  for x in loader:iter() do
    batches[#batches + 1] = { ids = x:totable(), padding = state.batch_padding, last = state.end_of_dataloader }
  end
  return batches
end

-- Every rank's batches: encoded into a fixed-size tensor for all_gather.
local function gather(batches)
  local flat = { #batches }
  for _, b in ipairs(batches) do
    flat[#flat + 1] = #b.ids
    flat[#flat + 1] = b.last and 1 or 0
    for r = 1, W do flat[#flat + 1] = b.padding[r] end
    for _, id in ipairs(b.ids) do flat[#flat + 1] = id end
  end
  assert(#flat <= SLOTS)
  for i = #flat + 1, SLOTS do flat[i] = -1 end
  local all = {}
  for r, t in ipairs(dist.all_gather(accel.tensor(flat, { dtype = accel.int64 }))) do
    local v, pos, out = t:totable(), 2, {}
    for k = 1, v[1] do
      local b = { ids = {}, padding = {}, last = v[pos + 1] == 1 }
      local size = v[pos]
      pos = pos + 2
      for q = 1, W do b.padding[q] = v[pos]; pos = pos + 1 end
      for i = 1, size do b.ids[i] = v[pos]; pos = pos + 1 end
      out[k] = b
    end
    all[r] = out
  end
  return all
end

local function sorted(t)
  local c = {}
  for i, v in ipairs(t) do c[i] = v end
  table.sort(c)
  return c
end

local function make_loader(n, options, shard)
  local loader = data.DataLoader(data.TensorDataset(accel.arange(n)), options)
  local state = require("accel.gradient_state")()
  if shard then loader:shard(rank, W, { even_batches = shard.even_batches, split_batches = shard.split_batches,
                                        state = state }) end
  return loader, state
end

for n = 1, 13 do
  for _, drop_last in ipairs({ false, true }) do
    for _, even in ipairs({ true, false }) do
      local what = string.format("W=%d n=%d drop_last=%s even_batches=%s", W, n, tostring(drop_last), tostring(even))
      local options = { batch_size = B, shuffle = true, seed = 11, drop_last = drop_last }
      local loader, state = make_loader(n, options, { even_batches = even })
      local split_options = { batch_size = B * W, shuffle = true, seed = 11, drop_last = drop_last }
      local split, split_state = make_loader(n, split_options, { even_batches = even, split_batches = true })
      -- One process at the global batch size: what each step must cover.
      local single = make_loader(n, split_options)
      for epoch = 0, 1 do
        local mine = read_epoch(loader, state)
        check.equal(#mine, loader:num_batches(), what .. ": num_batches")
        check.equal(state.active_loader, nil, what .. ": no active loader after the epoch")
        local split_mine = read_epoch(split, split_state)
        check.equal(#split_mine, #mine, what .. ": split_batches batch count")
        for k, b in ipairs(mine) do
          check.near(split_mine[k].ids, b.ids, 0, what .. ": split_batches reads the same batch " .. k)
          check.near(split_mine[k].padding, b.padding, 0, what .. ": split_batches padding " .. k)
        end
        local all = gather(mine)
        local count, padding, total_batches = {}, 0, 0
        for r = 1, W do
          local batches = all[r]
          total_batches = total_batches + #batches
          if even or drop_last then
            check.equal(#batches, #all[1], what .. ": every rank has as many batches")
          end
          for k, b in ipairs(batches) do
            check.equal(b.last, k == #batches, what .. ": end_of_dataloader on the last batch only")
            check.near(b.padding, all[1][k] and all[1][k].padding or b.padding, 0,
                       what .. ": the same padding table on every rank")
            local p = b.padding[r]
            if k < #batches then check.equal(p, 0, what .. ": padding only in the last batch") end
            if drop_last or not even then check.equal(p, 0, what .. ": no padding") end
            for i, id in ipairs(b.ids) do
              check.truthy(id >= 0 and id < n, what .. ": a real sample")
              if i <= #b.ids - p then count[id] = (count[id] or 0) + 1 else padding = padding + 1 end
            end
          end
        end
        check.equal(total_batches, loader:total_batches(), what .. ": total_batches")
        local expected_padding = (even and not drop_last) and math.ceil(n / W) * W - n or 0
        check.equal(padding, expected_padding, what .. ": padding rows")
        local read = drop_last and math.floor(n / (W * B)) * W * B or n
        local distinct = 0
        for id = 0, n - 1 do
          if count[id] then
            distinct = distinct + 1
            check.equal(count[id], 1, what .. ": sample " .. id .. " read once")
          end
        end
        check.equal(distinct, read, what .. ": samples read")
        -- Step k over all ranks (padding dropped) is the single process's batch k.
        local steps = read_epoch(single, {})
        for k, expected in ipairs(steps) do
          local union = {}
          for r = 1, W do
            local b = all[r][k]
            if b then for i = 1, #b.ids - b.padding[r] do union[#union + 1] = b.ids[i] end end
          end
          check.near(sorted(union), sorted(expected.ids), 0, what .. ": step " .. k .. " covers one global batch")
        end
      end
    end
  end
end

check.done(arg[0]:match("([^/]+)%.lua$"))
