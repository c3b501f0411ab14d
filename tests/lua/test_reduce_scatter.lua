-- nproc: 3
-- The flat collectives of sharded data parallelism, reduce_scatter and
-- all_gather_into, between real ranks: values for several dtypes and sizes,
-- in place, counts and the errors for wrong sizes. On one machine they go
-- through shared memory; tests/CMakeLists.txt runs this file again on 2
-- ranks, over Gloo's TCP (ACCEL_SHARED_MEMORY=0), over MPI and with --debug.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local dist = require("accel.core").dist
local rank, world = dist.state().rank, dist.state().world_size

-- Rank q's element i of a flat buffer: (i mod 7) + q + 1, small integers
-- that every dtype holds exactly, different on every rank and position.
local function rank_values(q, numel, dtype)
  return (accel.arange(numel):remainder(7) + (q + 1)):to(dtype)
end

-- What the elements [first, first + numel) of every rank's buffer reduce to.
local function reduced(first, numel, op, dtype)
  local position = accel.arange(first, first + numel):remainder(7)
  local expected = {
    sum = position * world + world * (world + 1) / 2,
    max = position + world,
    min = position + 1,
  }
  expected.mean = expected.sum / world
  return expected[op]:to(dtype)
end

local function same(actual, expected, what)
  local first = actual:narrow(1, 1, math.min(4, actual:numel()))
  check.truthy(actual:equal(expected), what .. ", starting " .. tostring(first))
end

-- Sizes that divide nothing in particular, and one whose shards outgrow a
-- chunk of the shared memory segment (about 1.3 MiB a rank with 3 ranks),
-- so that the collectives take several chunks.
local sizes = { 1, 5, 1001, 400003 }
local dtypes = { accel.float32, accel.float64, accel.bfloat16, accel.float16, accel.int64, accel.int32 }
local before = dist.counts()
local calls = 0

for _, dtype in ipairs(dtypes) do
  for _, n in ipairs(sizes) do
    local what = string.format("%s, shards of %d", dtype, n)
    local output = accel.zeros({ n }, { dtype = dtype })
    check.truthy(rawequal(dist.reduce_scatter(output, rank_values(rank, world * n, dtype)), output),
                 "reduce_scatter returns its output")
    same(output, reduced(rank * n, n, "sum", dtype), "reduce_scatter sum of " .. what)

    local gathered = accel.full({ world * n }, -1, { dtype = dtype })
    local mine = rank_values(rank, n, dtype)
    check.truthy(rawequal(dist.all_gather_into(gathered, mine), gathered), "all_gather_into returns its output")
    for q = 0, world - 1 do
      same(gathered:narrow(1, q * n + 1, n), rank_values(q, n, dtype),
           "all_gather_into of " .. what .. ", rank " .. q)
    end
    calls = calls + 1
  end
end

-- Every reduce op, the mean of floating-point dtypes only (as all_reduce's).
for _, op in ipairs({ "max", "min", "mean" }) do
  local op_dtypes = op == "mean" and { accel.float32, accel.bfloat16 } or { accel.float64, accel.int64 }
  for _, dtype in ipairs(op_dtypes) do
    local n = 3001
    local output = accel.empty({ n }, { dtype = dtype })
    dist.reduce_scatter(output, rank_values(rank, world * n, dtype), op)
    same(output, reduced(rank * n, n, op, dtype), string.format("reduce_scatter %s of %s", op, dtype))
  end
end

-- In place: the input is this rank's slice of the output.
for _, n in ipairs({ 7, 400003 }) do
  local flat = accel.zeros({ world * n })
  local slice = flat:narrow(1, rank * n + 1, n)
  slice:copy_(rank_values(rank, n, accel.float32))
  dist.all_gather_into(flat, slice)
  for q = 0, world - 1 do
    same(flat:narrow(1, q * n + 1, n), rank_values(q, n, accel.float32),
         string.format("all_gather_into in place of %d elements, rank %d", n, q))
  end
end

-- Counted by kind: all_gather_into under all_gather.
local after = dist.counts()
check.equal(after.reduce_scatter - before.reduce_scatter, calls + 6, "reduce_scatters counted")
check.equal(after.all_gather - before.all_gather, calls + 2, "all_gather_into counted as all_gather")
check.equal(after.all_reduce - before.all_reduce, 0, "no all_reduce counted")

-- Wrong arguments fail before the collective communicates, naming it and
-- the sizes.
check.raises(function() dist.reduce_scatter(accel.zeros(4), accel.zeros(4 * world + 1)) end,
             "reduce_scatter of a wrong size",
             "reduce_scatter: input has " .. (4 * world + 1) .. " elements, expected " .. world .. " ranks x 4")
check.raises(function() dist.all_gather_into(accel.zeros(4 * world - 1), accel.zeros(4)) end,
             "all_gather_into of a wrong size",
             "all_gather_into: output has " .. (4 * world - 1) .. " elements, expected " .. world .. " ranks x 4")
local doubles = accel.zeros(2 * world, { dtype = accel.float64 })
check.raises(function() dist.reduce_scatter(accel.zeros(2), doubles) end, "reduce_scatter of two dtypes",
             "one dtype", "float32[2]", "float64[" .. 2 * world .. "]")
check.raises(function() dist.all_gather_into(accel.zeros(world, 2), accel.zeros(2)) end,
             "all_gather_into into a 2-D output", "1-D and contiguous", "float32[" .. world .. ", 2]")
-- Three elements overlapping this rank's slice, one off.
local flat = accel.zeros(3 * world)
local off_by_one = flat:narrow(1, rank == world - 1 and 3 * rank or 3 * rank + 2, 3)
check.raises(function() dist.all_gather_into(flat, off_by_one) end,
             "all_gather_into from the wrong slice", "not rank " .. rank .. "'s slice")
check.raises(function() dist.reduce_scatter(flat:narrow(1, 1, 3), flat) end,
             "reduce_scatter into its own input", "output shares memory with input")
check.raises(function() dist.reduce_scatter(accel.zeros(2), accel.zeros(2 * world), "median") end,
             "reduce_scatter with an unknown op", "median")
local longs = accel.zeros(2 * world, { dtype = accel.int64 })
check.raises(function() dist.reduce_scatter(accel.zeros(2, { dtype = accel.int64 }), longs, "mean") end,
             "reduce_scatter mean of integers", "'mean' needs a floating-point dtype", "int64[2]")
check.equal(dist.counts().reduce_scatter, after.reduce_scatter, "failed calls are not counted")

-- Under --debug, ranks that pass shards of different sizes all fail at once,
-- each named with what it passed.
if os.getenv("ACCEL_DEBUG") == "1" then
  local n = rank + 1
  check.raises(function() dist.reduce_scatter(accel.zeros(n), accel.zeros(world * n)) end,
               "--debug: reduce_scatter of different shards", "reduce_scatter: ranks passed different tensors",
               "rank 0 called reduce_scatter of float32[1] (sum)",
               "rank 1 called reduce_scatter of float32[2] (sum)")
  check.raises(function() dist.all_gather_into(accel.zeros(world * n), accel.zeros(n)) end,
               "--debug: all_gather_into of different shards", "all_gather_into: ranks passed different tensors",
               "rank 0 called all_gather_into of float32[1]", "rank 1 called all_gather_into of float32[2]")
end

-- Still in step after the errors.
local output = accel.zeros(2)
dist.reduce_scatter(output, rank_values(rank, 2 * world, accel.float32))
same(output, reduced(rank * 2, 2, "sum", accel.float32), "reduce_scatter after the errors")

check.done("test_reduce_scatter")
