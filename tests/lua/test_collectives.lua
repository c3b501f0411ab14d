-- nproc: 3
-- The Accelerator's process fields and collectives over real Gloo.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")

local acc = accel.Accelerator{}
local rank, world = acc.process_index, acc.num_processes
check.equal(world, 3, "num_processes")
check.equal(rank, tonumber(os.getenv("RANK")), "process_index is RANK")
check.equal(acc.is_main_process, rank == 0, "is_main_process")
check.equal(acc.distributed_type, "MULTI_CPU", "distributed_type")

-- gather concatenates along dim 1 in rank order; 0-dim tensors are stacked
local mine = accel.full({ 2, 2 }, rank)
local all = acc:gather(mine)
check.near(all:size(), { 6, 2 }, 0, "gather shape")
check.near(all:select(2, 1), { 0, 0, 1, 1, 2, 2 }, 0, "gather order")
check.near(acc:gather(accel.tensor(rank * 10)), { 0, 10, 20 }, 0, "gather of 0-dim tensors")
local pair = acc:gather({ accel.tensor({ rank }), accel.tensor({ -rank }) })
check.near(pair[2], { 0, -1, -2 }, 0, "gather of a table of tensors")
check.near(acc:gather(accel.tensor({ rank == 1 })), { false, true, false }, 0, "gather of bool tensors")

-- reduce: sum (default) and mean, leaving the input untouched
local v = accel.tensor({ rank, 1.0 }, { dtype = accel.float32 })
check.near(acc:reduce(v), { 3, 3 }, 0, "reduce sum")
check.near(acc:reduce(v, "mean"), { 1, 1 }, 1e-7, "reduce mean")
check.near(v, { rank, 1 }, 0, "reduce does not modify its input")
check.raises(function() acc:reduce(v, "median") end, "bad reduce op", "median")

-- On one machine all-reduces go through shared memory, over TCP with
-- ACCEL_SHARED_MEMORY=0 (the lua.test_collectives_over_tcp run); the values
-- above are the same either way.
local counts = require("accel.core").dist.counts
local before = counts()
acc:reduce(accel.ones({ 1000 }))
local through_memory = counts().all_reduce_shared_memory - before.all_reduce_shared_memory
check.equal(through_memory, os.getenv("ACCEL_SHARED_MEMORY") == "0" and 0 or 1,
            "all-reduces through shared memory")

-- broadcast from a chosen rank, in place
local b = accel.full({ 3 }, rank, { dtype = accel.float32 })
require("accel.core").dist.broadcast(b, 2)
check.near(b, { 2, 2, 2 }, 0, "broadcast from rank 2")

-- prepare broadcasts rank 0's initial weights
accel.set_seed(100 + rank)  -- deliberately different on every rank
local model = accel.nn.Linear(3, 2)
acc:prepare(model)
local weights = acc:gather(model.weight:unsqueeze(1))
check.near(weights[2], weights[1], 0, "rank 1 has rank 0's weights")
check.near(weights[3], weights[1], 0, "rank 2 has rank 0's weights")

acc:wait_for_everyone()
check.raises(function() accel.Accelerator{ gradient_acumulation_steps = 2 } end, "unknown option",
             "gradient_acumulation_steps")

check.done("test_collectives")
