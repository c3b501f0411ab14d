-- nproc: 3
-- Collectives over Lua tables keyed by strings: every rank walks a table in
-- one canonical key order (numbers ascending, then strings sorted), so each
-- value comes back under its own key, whatever order `pairs` gives on each
-- rank. Each rank builds its tables inserting the keys in its own order, so
-- `pairs` differs between ranks here for sure. Also: keys of other types are
-- refused; with the --debug check on (gathering.debug, what accel-run
-- --debug turns on) ranks passing different keys all fail naming the ranks
-- and the keys; pad_across_processes of tensors with different numbers of
-- dims fails on every rank, always, naming the ranks and the shapes.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local gathering = require("accel.gathering")

local acc = accel.Accelerator{}
local rank, world = acc.process_index, acc.num_processes
check.equal(world, 3, "num_processes")

-- A dozen keys, each with its own shape: key i holds a (rank + 1) x i tensor
-- for gather_for_metrics (rows differ between ranks), and a 2 x i x (i % 3 + 1)
-- one for gather.
local names = { "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
                "kilo", "lima" }

-- The keys in an order of this rank's and this round's own (steps coprime
-- to 12 give permutations).
local function insertion_order(round)
  local step = ({ 1, 5, 7 })[rank + 1]
  local order = {}
  for i = 1, #names do order[i] = ((i - 1) * step + round * (rank + 1)) % #names + 1 end
  return order
end

local function value_of(i, r, round)
  return 1000 * r + 10 * i + round
end

for round = 1, 20 do
  local mine = {}
  for _, i in ipairs(insertion_order(round)) do
    mine[names[i]] = accel.full({ 2, i, i % 3 + 1 }, value_of(i, rank, round))
  end
  local all = acc:gather(mine)
  for i, name in ipairs(names) do
    local got = all[name]
    check.near(got:size(), { 2 * world, i, i % 3 + 1 }, 0, string.format("round %d: gather's %s shape", round, name))
    for r = 0, world - 1 do
      local part = got:narrow(1, 2 * r + 1, 2)
      check.equal(part:min():item(), value_of(i, r, round), string.format("round %d: %s from rank %d", round, name, r))
      check.equal(part:max():item(), value_of(i, r, round), string.format("round %d: %s from rank %d", round, name, r))
    end
  end
end

-- gather_for_metrics({predictions = ..., references = ...}), same shapes:
-- the case that mixed its two values in about one launch in ten.
for round = 1, 20 do
  local batch = {}
  local order = (rank + round) % 2 == 0 and { "predictions", "references" } or { "references", "predictions" }
  for _, key in ipairs(order) do
    local sign = key == "predictions" and 1 or -1
    batch[key] = accel.full({ 4 }, sign * (10 * rank + round))
  end
  local all = acc:gather_for_metrics(batch)
  local want_p, want_r = {}, {}
  for r = 0, world - 1 do
    for _ = 1, 4 do
      want_p[#want_p + 1] = 10 * r + round
      want_r[#want_r + 1] = -(10 * r + round)
    end
  end
  check.near(all.predictions, want_p, 0, "round " .. round .. ": predictions under their own key")
  check.near(all.references, want_r, 0, "round " .. round .. ": references under their own key")
end

-- gather_for_metrics with rows differing between ranks and per key.
do
  local mine = {}
  for _, i in ipairs(insertion_order(7)) do mine[names[i]] = accel.full({ rank + 1, i }, value_of(i, rank, 0)) end
  local all = acc:gather_for_metrics(mine)
  for i, name in ipairs(names) do
    check.near(all[name]:size(), { 6, i }, 0, "gather_for_metrics' " .. name .. " shape")
    local first = 1
    for r = 0, world - 1 do
      check.near(all[name]:narrow(1, first, r + 1):mean():item(), value_of(i, r, 0), 0,
                 "gather_for_metrics' " .. name .. " rows of rank " .. r)
      first = first + r + 1
    end
  end
end

-- broadcast, reduce and pad_across_processes of string-keyed tables.
do
  local mine = {}
  for _, i in ipairs(insertion_order(3)) do mine[names[i]] = accel.full({ i }, value_of(i, rank, 0)) end
  local from1 = acc:broadcast(mine, 1)
  local summed = acc:reduce(mine, "sum")
  for i, name in ipairs(names) do
    check.near(from1[name], accel.full({ i }, value_of(i, 1, 0)), 0, "broadcast's " .. name)
    local total = 0
    for r = 0, world - 1 do total = total + value_of(i, r, 0) end
    check.near(summed[name], accel.full({ i }, total), 0, "reduce's " .. name)
  end

  local uneven = {}
  for _, i in ipairs(insertion_order(5)) do
    uneven[names[i]] = accel.full({ 2, 1 + (i + rank) % 4 }, value_of(i, rank, 0))
  end
  local padded = acc:pad_across_processes(uneven, { dim = 2, pad_index = -1 })
  for i, name in ipairs(names) do
    local longest = 0
    for r = 0, world - 1 do longest = math.max(longest, 1 + (i + r) % 4) end
    local have = 1 + (i + rank) % 4
    check.near(padded[name]:size(), { 2, longest }, 0, "pad_across_processes' " .. name .. " shape")
    check.near(padded[name]:narrow(2, 1, have), accel.full({ 2, have }, value_of(i, rank, 0)), 0,
               "pad_across_processes' " .. name .. " values")
    if have < longest then
      check.near(padded[name]:narrow(2, have + 1, longest - have), accel.full({ 2, longest - have }, -1), 0,
                 "pad_across_processes' " .. name .. " padding")
    end
  end
end

-- Numbers and strings as keys of one table, and nested tables: numbers
-- first, then strings.
do
  local mixed = {}
  if rank % 2 == 0 then
    mixed.loss = accel.tensor({ rank })
    mixed[2] = accel.tensor({ 20 + rank })
    mixed[1] = { inner = accel.tensor({ 10 + rank }), [1] = accel.tensor({ 30 + rank }) }
  else
    mixed[1] = { [1] = accel.tensor({ 30 + rank }), inner = accel.tensor({ 10 + rank }) }
    mixed[2] = accel.tensor({ 20 + rank })
    mixed.loss = accel.tensor({ rank })
  end
  local all = acc:gather(mixed)
  check.near(all.loss, { 0, 1, 2 }, 0, "mixed keys: loss")
  check.near(all[2], { 20, 21, 22 }, 0, "mixed keys: [2]")
  check.near(all[1].inner, { 10, 11, 12 }, 0, "mixed keys: [1].inner")
  check.near(all[1][1], { 30, 31, 32 }, 0, "mixed keys: [1][1]")
end

-- Keys other than numbers and strings are refused. Once the ranks have
-- compared their values' structure (--debug) the error is raised on every
-- rank and can be caught; without it, a rank with a faulty value ends (other
-- ranks may be waiting with good ones: tests/launch/test_collective_errors.sh).
gathering.debug = true
check.raises(function() acc:gather({ [true] = accel.ones(1) }) end, "a boolean key", "gather",
             "keys must be numbers or strings", "boolean")
check.raises(function() acc:reduce({ a = { [accel.ones(1)] = accel.ones(1) } }) end, "a tensor key", "reduce",
             "keys must be numbers or strings", "in a")
check.raises(function() acc:gather({ a = "text" }) end, "a string value", "gather", "got a string at a")
gathering.debug = false

-- pad_across_processes of tensors with different numbers of dims: an error
-- on every rank, with or without --debug, naming every rank's shape.
do
  local t = rank == 1 and accel.zeros(2, 3, 4) or accel.zeros(2, 3)
  check.raises(function() acc:pad_across_processes(t) end, "different dims", "pad_across_processes",
               "different numbers of dims", "rank 0 passed [2, 3] (2 dims)", "rank 1 passed [2, 3, 4] (3 dims)",
               "rank 2 passed [2, 3] (2 dims)")
  local keyed = { scores = rank == 2 and accel.zeros(5) or accel.zeros(5, 1) }
  check.raises(function() acc:pad_across_processes(keyed) end, "different dims under a key",
               "pad_across_processes of scores", "rank 2 passed [5] (1 dims)")
  check.raises(function() acc:pad_across_processes(accel.zeros(2), { dims = 1 }) end, "an unknown option",
               "pad_across_processes", "unknown option 'dims'")
  check.near(acc:pad_across_processes(accel.ones(2), { dim = 3 }), { 1, 1 }, 0,
             "a dim beyond the last leaves the tensor as it is")
  check.near(acc:pad_across_processes(accel.ones(rank + 1), { dim = -1, pad_first = true }):size(), { 3 }, 0,
             "dim -1 pads the last dim")
end

-- The --debug check: the ranks exchange their tables' key structure and all
-- fail, naming the ranks and the keys, instead of pairing different keys.
gathering.debug = true
do
  local batch = { predictions = accel.ones(2), references = accel.ones(2) }
  if rank == 2 then batch = { predictions = accel.ones(2), labels = accel.ones(2) } end
  local err = check.raises(function() acc:gather_for_metrics(batch) end, "different keys", "gather_for_metrics",
                           "ranks passed tables with different keys",
                           "ranks 0, 1 passed keys {predictions, references}", "rank 2 passed keys {labels, predictions}",
                           "'labels' only on rank 2", "'references' only on ranks 0, 1", "checked because of --debug")
  check.truthy(err:find("test_collectives_tables.lua", 1, true), "the message points at the test's line: " .. err)

  local nested = { a = { x = accel.ones(1) } }
  if rank == 0 then nested = { a = { y = accel.ones(1) } } end
  check.raises(function() acc:reduce(nested) end, "different nested keys", "reduce", "rank 0 passed keys {a.y}",
               "ranks 1, 2 passed keys {a.x}")
  local bad = rank == 0 and { [false] = accel.ones(1) } or { accel.ones(1) }
  check.raises(function() acc:gather(bad) end, "one rank's bad key", "gather",
               "rank 0 passed an invalid value: table keys must be numbers or strings")
  -- Matching tables pass, and collectives go on.
  local same = acc:gather({ b = accel.tensor({ rank }), a = accel.tensor({ -rank }) })
  check.near(same.b, { 0, 1, 2 }, 0, "matching keys pass the check")
end
gathering.debug = false

acc:wait_for_everyone()
check.done("test_collectives_tables")
