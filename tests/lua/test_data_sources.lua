-- nproc: 1 2 3
-- Data loading across ranks, each checked against a single-process
-- baseline and against the rule written out here from first principles:
-- iterable data sets sharded as Accelerate's IterableDatasetShard, the
-- sampler and batch_sampler options sharded as its BatchSamplerShard,
-- dispatch_batches, and join_uneven_inputs. Run at 1, 2 and 3 ranks (tests/CMakeLists.txt).
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local nn, optim, data = accel.nn, accel.optim, accel.data

local base = accel.Accelerator{}
local W, rank = base.num_processes, base.process_index

-- Sample i is the float row {i}; a batch's ids are its column.
local function ids(batch) return batch:view(-1):totable() end

-- A data set whose iter() yields samples 1..n (counting the samples read).
local function stream(n)
  local ds = { reads = 0 }
  function ds:iter()
    local i = 0
    return function()
      if i == n then return nil end
      i = i + 1
      self.reads = self.reads + 1
      return accel.tensor({ i }, { dtype = accel.float32 })
    end
  end
  return ds
end

local function concat(lists)
  local out = {}
  for _, l in ipairs(lists) do for _, v in ipairs(l) do out[#out + 1] = v end end
  return out
end

local function range(n)
  local out = {}
  for i = 1, n do out[i] = i end
  return out
end

-- The expected batches of rank `r` for the epoch's order `order`, with
-- pb items per rank and step: global batches of pb * W items, rank r
-- taking items r*pb + 1 .. (r + 1)*pb of each; the last incomplete one
-- is dropped (drop_last), completed by cycling the order from its start
-- (even_batches), or left short (the ranks past its end get nothing).
local function expected_batches(order, pb, r, o)
  local G, s = pb * W, {}
  for i, v in ipairs(order) do s[i] = v end
  local n = #s
  if o.drop_last then
    for i = n, math.floor(n / G) * G + 1, -1 do s[i] = nil end
  elseif o.even_batches and W > 1 and n % G ~= 0 then  -- one process: nothing to even out
    local i = 0
    while #s % G ~= 0 do
      i = i + 1
      s[#s + 1] = order[(i - 1) % n + 1]
    end
  end
  local out = {}
  for first = 0, #s - 1, G do
    local batch = {}
    for i = first + r * pb + 1, math.min(first + (r + 1) * pb, #s) do batch[#batch + 1] = s[i] end
    if #batch > 0 then out[#out + 1] = batch end
  end
  return out
end


-- Reads one epoch through `acc`'s prepared loader: this rank's batches,
-- what gather_for_metrics returned, and end_of_dataloader per batch.
-- With uneven batches a collective inside the loop would wait for ranks
-- that have finished: every rank's samples are gathered after it, sorted.
local function read_epoch(acc, loader, uneven)
  local batches, gathered, ends = {}, {}, {}
  for xb in loader:iter() do
    batches[#batches + 1] = ids(xb)
    if not uneven then
      for _, v in ipairs(acc:gather_for_metrics(xb):view(-1):totable()) do gathered[#gathered + 1] = v end
    end
    ends[#ends + 1] = acc.gradient_state.end_of_dataloader
  end
  if uneven then
    gathered = concat(acc:gather_object(concat(batches)))
    table.sort(gathered)
  end
  return batches, gathered, ends
end

local function check_epoch(what, acc, loader, order, pb, o)
  local uneven = not o.even_batches and not o.drop_last
  local batches, gathered, ends = read_epoch(acc, loader, uneven)
  local expected = expected_batches(order, pb, rank, o)
  check.equal(#batches, #expected, what .. ": batches on rank " .. rank)
  for k = 1, #expected do check.near(batches[k], expected[k], 0, what .. ": batch " .. k) end
  for k = 1, #ends do check.equal(ends[k], k == #ends, what .. ": end_of_dataloader at batch " .. k) end
  check.equal(acc.gradient_state.end_of_dataloader, false, what .. ": end_of_dataloader after the epoch")
  -- Every sample exactly once (the whole global batches with drop_last).
  local kept = order
  if o.drop_last then kept = { unpack(order, 1, math.floor(#order / (pb * W)) * pb * W) } end
  if uneven then
    kept = { unpack(kept) }
    table.sort(kept)
  end
  check.near(gathered, kept, 0, what .. ": gather_for_metrics")
end

-- 1. Iterable data sets ----------------------------------------------------
do
  -- The unprepared loader: batches of 2 of the stream, the last short.
  local single = {}
  for xb in data.DataLoader(stream(7), { batch_size = 2 }):iter() do single[#single + 1] = ids(xb) end
  check.near(single, { { 1, 2 }, { 3, 4 }, { 5, 6 }, { 7 } }, 0, "iterable, one process")
  local i = 0
  local once = data.DataLoader(function()
    i = i + 1
    if i <= 3 then return accel.tensor({ i }, { dtype = accel.float32 }) end
  end)
  check.raises(function() data.DataLoader(stream(3), { shuffle = true }) end, "iterable with shuffle",
               "shuffle", "iterable")
  check.raises(function() data.DataLoader(stream(3), { sampler = { 1 } }) end, "iterable with sampler",
               "sampler")
  check.raises(function() data.DataLoader(stream(3)):num_batches() end, "iterable length", "no length")
  local first = {}
  for xb in once:iter() do first[#first + 1] = ids(xb) end
  check.near(first, { { 1 }, { 2 }, { 3 } }, 0, "an iterator function is a data set")
  check.raises(function() once:iter() end, "an iterator function is read once", "already read", "iter()")

  for _, n in ipairs({ 11, 12, 2 }) do
    for _, o in ipairs({
      { even_batches = true }, { even_batches = false }, { drop_last = true },
      { even_batches = true, split_batches = true }, { even_batches = false, split_batches = true },
    }) do
      local acc = accel.Accelerator{ even_batches = o.even_batches, split_batches = o.split_batches }
      local B = o.split_batches and W or 2
      local loader = acc:prepare(data.DataLoader(stream(n), { batch_size = B, drop_last = o.drop_last }))
      local what = string.format("iterable n=%d even=%s drop_last=%s split=%s", n, tostring(o.even_batches),
                                 tostring(o.drop_last), tostring(o.split_batches))
      check_epoch(what, acc, loader, range(n), o.split_batches and 1 or 2,
                  { even_batches = o.even_batches ~= false, drop_last = o.drop_last })
      check_epoch(what .. " (epoch 2)", acc, loader, range(n), o.split_batches and 1 or 2,
                  { even_batches = o.even_batches ~= false, drop_last = o.drop_last })
    end
  end
end

-- 2. sampler and batch_sampler ---------------------------------------------
local n = 11
local x = accel.arange(1, n + 1):float():view(n, 1)
local function reversed(epoch)
  local out = {}
  for i = 1, n do out[i] = epoch % 2 == 0 and n + 1 - i or i end
  return out
end
do
  check.raises(function() data.DataLoader(data.TensorDataset(x), { sampler = reversed, shuffle = true }) end,
               "sampler with shuffle", "sampler", "shuffle")
  check.raises(function() data.DataLoader(data.TensorDataset(x), { batch_sampler = { { 1 } }, batch_size = 2 }) end,
               "batch_sampler with batch_size", "batch_sampler", "batch_size")
  check.raises(function() data.DataLoader(data.TensorDataset(x), { sampler = 3 }) end, "sampler type",
               "sampler", "number")
  check.raises(function()
    for _ in data.DataLoader(data.TensorDataset(x), { sampler = { 1, 12 } }):iter() do end
  end, "index out of range", "12", "1..11")
  -- One process: the sampler's order, in batches.
  local single = {}
  for xb in data.DataLoader(data.TensorDataset(x), { sampler = reversed, batch_size = 4 }):iter() do
    single[#single + 1] = ids(xb)
  end
  check.near(single, { { 11, 10, 9, 8 }, { 7, 6, 5, 4 }, { 3, 2, 1 } }, 0, "sampler, one process")

  for _, o in ipairs({ { even_batches = true }, { even_batches = false }, { drop_last = true },
                       { even_batches = true, split_batches = true } }) do
    local acc = accel.Accelerator{ even_batches = o.even_batches, split_batches = o.split_batches }
    local B = o.split_batches and 2 * W or 2
    local loader = acc:prepare(data.DataLoader(data.TensorDataset(x),
                                               { sampler = reversed, batch_size = B, drop_last = o.drop_last }))
    local what = string.format("sampler even=%s drop_last=%s split=%s", tostring(o.even_batches),
                               tostring(o.drop_last), tostring(o.split_batches))
    local e = { even_batches = o.even_batches ~= false, drop_last = o.drop_last }
    check.equal(loader:num_batches(), #expected_batches(reversed(0), 2, rank, e), what .. ": num_batches")
    check_epoch(what, acc, loader, reversed(0), 2, e)
    check_epoch(what .. " (epoch 1)", acc, loader, reversed(1), 2, e)
  end

  -- User-sized batches: rank r takes batches r, r + W, ...; a missing
  -- batch of the last round gets as many samples as the first batch,
  -- cycled from the items of the first W batches.
  local batches = { { 1, 2, 3 }, { 4 }, { 5, 6 }, { 7, 8, 9, 10 }, { 11 } }
  local expected = W == 1 and { batches } or W == 2 and { { { 1, 2, 3 }, { 5, 6 }, { 11 } }, { { 4 }, { 7, 8, 9, 10 }, { 1, 2, 3 } } }
                   or { { { 1, 2, 3 }, { 7, 8, 9, 10 } }, { { 4 }, { 11 } }, { { 5, 6 }, { 1, 2, 3 } } }
  local acc = accel.Accelerator{}
  local loader = acc:prepare(data.DataLoader(data.TensorDataset(x), { batch_sampler = batches }))
  for epoch = 1, 2 do  -- the user's lists are read again, unchanged
    local got, gathered = read_epoch(acc, loader)
    check.near(got, expected[rank + 1], 0, "batch_sampler on rank " .. rank .. ", epoch " .. epoch)
    table.sort(gathered)
    check.near(gathered, range(n), 0, "batch_sampler: gather_for_metrics")
  end
end

-- 3. dispatch_batches: the batches each rank gets are those it reads
-- itself; only the main process reads the data.
do
  for _, o in ipairs({ { even_batches = true }, { even_batches = false }, { drop_last = true },
                       { even_batches = true, split_batches = true } }) do
    local what = string.format("dispatch even=%s drop_last=%s split=%s", tostring(o.even_batches),
                               tostring(o.drop_last), tostring(o.split_batches))
    local e = { even_batches = o.even_batches ~= false, drop_last = o.drop_last }
    local B = o.split_batches and W or 2
    local acc = accel.Accelerator{ dispatch_batches = true, even_batches = o.even_batches,
                                   split_batches = o.split_batches }
    local ds = stream(n)
    local loader = acc:prepare(data.DataLoader(ds, { batch_size = B, drop_last = o.drop_last }))
    check_epoch(what .. " iterable", acc, loader, range(n), o.split_batches and 1 or 2, e)
    check.equal(ds.reads, rank == 0 and n or 0, what .. ": samples read on rank " .. rank)
    -- A map-style data set: the same batches as each rank reading its own.
    local own = accel.Accelerator{ even_batches = o.even_batches, split_batches = o.split_batches }
    local uneven = not e.even_batches and not o.drop_last
    local reference = read_epoch(own, own:prepare(data.DataLoader(data.TensorDataset(x),
                                                                  { batch_size = B, drop_last = o.drop_last })),
                                 uneven)
    local map = acc:prepare(data.DataLoader(data.TensorDataset(x), { batch_size = B, drop_last = o.drop_last }))
    local got, gathered, ends = read_epoch(acc, map, uneven)
    check.near(got, reference, 0, what .. " map-style batches")
    check.equal(ends[#ends], true, what .. " map-style end_of_dataloader")
    table.sort(gathered)
    check.near(gathered, o.drop_last and { unpack(range(n), 1, #gathered) } or range(n), 0,
               what .. " map-style gather_for_metrics")
    if o.drop_last then check.equal(#gathered, math.floor(n / (B * W)) * B * W, what .. " drop_last") end
    -- Batches that are tables of tensors and strings.
    local named = { n = 4 }
    function named:iter()
      local i = 0
      return function()
        if i == 4 then return nil end
        i = i + 1
        return { x = accel.tensor({ i, -i }, { dtype = accel.float32 }),
                 id = accel.tensor({ i }, { dtype = accel.int64 }) }, "s" .. i
      end
    end
    local sent = acc:prepare(data.DataLoader(named, { batch_size = o.split_batches and W or 1 }))
    for batch, names in sent:iter() do
      check.near(batch.x:select(2, 1), batch.id:view(-1):float(), 0, what .. ": table batch rows agree")
      check.equal(names[1], "s" .. batch.id:view(-1):totable()[1], what .. ": strings travel with rows")
    end
  end
end

-- 4. join_uneven_inputs: rank 0 has one batch more than the others. SGD
-- on y = w x + b with squared error, batch 1: the gradient each step is
-- the sum over the ranks that still have a batch, divided by W.
do
  local steps = 3
  local count = steps * W + 1
  local xs, ys = {}, {}
  for i = 1, count do xs[i], ys[i] = 0.1 * i, 0.3 * i - 0.2 end
  local w, b, lr = 0.5, -0.25, 0.1
  for k = 1, steps + 1 do
    local gw, gb = 0, 0
    for r = 0, W - 1 do
      local i = (k - 1) * W + r + 1
      if i <= count then
        local err = w * xs[i] + b - ys[i]
        gw, gb = gw + 2 * err * xs[i], gb + 2 * err
      end
    end
    w, b = w - lr * gw / W, b - lr * gb / W
  end

  local acc = accel.Accelerator{}
  local model = nn.Linear(1, 1)
  accel.no_grad(function()
    model.weight:fill_(0.5)
    model.bias:fill_(-0.25)
  end)
  local opt = optim.SGD(model:parameters(), { lr = lr })
  local xt = accel.tensor(xs, { dtype = accel.float32 }):view(count, 1)
  local yt = accel.tensor(ys, { dtype = accel.float32 }):view(count, 1)
  local loader = data.DataLoader(data.TensorDataset(xt, yt), { batch_size = 1 })
  model, opt, loader = acc:prepare(model, opt, loader)
  local mine = 0
  acc:join_uneven_inputs({ model }, function()
    check.equal(loader.even_batches, W == 1, "join overrides even_batches (one process: nothing to join)")
    for xb, yb in loader:iter() do
      acc:backward(nn.functional.mse_loss(model(xb), yb))
      opt:step()
      opt:zero_grad()
      mine = mine + 1
    end
  end, { even_batches = false })
  check.equal(loader.even_batches, true, "join restores even_batches")
  -- A joined rank's last synchronising backward was a shadow step: the
  -- reducer's hook fired for every parameter.
  if rank > 0 then
    local ready = 0
    for _, event in ipairs(acc._models[1].sync:last_events()) do
      if event[1] == "gradient" then ready = ready + 1 end
    end
    check.equal(ready, 2, "shadow step: gradients ready on rank " .. rank)
  end
  check.equal(mine, rank == 0 and steps + 1 or steps, "batches on rank " .. rank)
  check.near(model.weight, { { w } }, 1e-5, "join: weight = single-process updates")
  check.near(model.bias, { b }, 1e-5, "join: bias = single-process updates")
  check.raises(function() acc:join_uneven_inputs({ model }, function() end, { even = true }) end,
               "join option", "even", "join_uneven_inputs")

  -- Every rank a different number of steps (rank r: steps - r), losses
  -- weighed by backward{num_items}: the gradient is the mean over the
  -- active ranks' items.
  w, b = 0.5, -0.25
  for k = 1, steps do
    local gw, gb, items = 0, 0, 0
    for r = 0, W - 1 do
      if k <= steps - r then
        local i = (k - 1) * W + r + 1
        local err = w * xs[i] + b - ys[i]
        gw, gb, items = gw + 2 * err * xs[i], gb + 2 * err, items + 1
      end
    end
    w, b = w - lr * gw / items, b - lr * gb / items
  end
  local model2 = nn.Linear(1, 1)
  accel.no_grad(function()
    model2.weight:fill_(0.5)
    model2.bias:fill_(-0.25)
  end)
  local uneven = accel.Accelerator{ even_batches = false }
  local opt2
  model2, opt2 = uneven:prepare(model2, optim.SGD(model2:parameters(), { lr = lr }))
  uneven:join_uneven_inputs({ model2 }, function()
    for k = 1, steps - rank do
      local i = (k - 1) * W + rank + 1
      uneven:backward(nn.functional.mse_loss(model2(xt:narrow(1, i, 1)), yt:narrow(1, i, 1)), { num_items = 1 })
      opt2:step()
      opt2:zero_grad()
    end
  end)
  check.near(model2.weight, { { w } }, 1e-5, "join with num_items: weight")
  check.near(model2.bias, { b }, 1e-5, "join with num_items: bias")
end
check.done(check.run_name("test_data_sources"))
