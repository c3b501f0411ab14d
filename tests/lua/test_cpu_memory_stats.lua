-- accel.cpu_memory_stats: the CPU allocator's blocks over 1 KiB held by live
-- tensors, their peak, and what the pools keep for reuse.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")

accel.release_pooled_blocks()
local before = accel.cpu_memory_stats()
check.equal(before.pooled_bytes, 0, "nothing pooled after release_pooled_blocks")
accel.reset_peak_cpu_memory_stats()
check.equal(accel.cpu_memory_stats().peak_allocated_bytes, before.allocated_bytes, "the peak starts at what is live")
local t = accel.zeros(1024, 1024)  -- 4 MiB
local live = accel.cpu_memory_stats()
check.equal(live.allocated_bytes - before.allocated_bytes, 4 * 2 ^ 20, "a 4 MiB tensor is allocated")
accel.release_tensor(t)
local after = accel.cpu_memory_stats()
check.equal(after.allocated_bytes, before.allocated_bytes, "released, it is no longer allocated")
check.equal(after.peak_allocated_bytes - before.allocated_bytes, 4 * 2 ^ 20, "the peak remembers it")
check.equal(after.pooled_bytes, 4 * 2 ^ 20, "its block waits in the pool")
accel.release_pooled_blocks()
check.equal(accel.cpu_memory_stats().pooled_bytes, 0, "and goes back on request")
check.done("test_cpu_memory_stats")
