-- nproc: 2
-- The Accelerator's collectives on Lua values and its process helpers.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")

local acc = accel.Accelerator{}
local rank = acc.process_index

-- gather_object: any serialisable value, in rank order
local objects = acc:gather_object({ rank = rank, name = "r" .. rank, list = { 1, rank }, t = accel.tensor({ rank, 2 }) })
check.equal(#objects, 2, "one object per rank")
check.equal(objects[2].name, "r1", "strings survive")
check.equal(objects[2].list[2], 1, "nested tables survive")
check.near(objects[2].t, { 1, 2 }, 0, "tensors survive")
check.raises(function() acc:gather_object(function() end) end, "functions are refused", "cannot serialise")
-- Bytes from a peer that are no value: every rank refuses them, naming the
-- sending rank (rank 1 sends garbage here, through the real all_gather).
local serialize = require("accel.serialize")
local dump = serialize.dump
if rank == 1 then serialize.dump = function() return "garbage" end end
check.raises(function() acc:gather_object(1) end, "a peer's bytes that are no value name the peer",
             "gather_object: the value of rank 1", "not an accel value file")
serialize.dump = dump
-- So is a dispatched batch's header from the main process.
local dispatching = accel.Accelerator{ dispatch_batches = true }
local dispatched = dispatching:prepare(accel.data.DataLoader(accel.data.TensorDataset(accel.randn(8, 2)),
                                                             { batch_size = 2 }))
if rank == 0 then serialize.dump = function() return "garbage" end end
check.raises(function() for _ in dispatched:iter() do end end, "a dispatched header that is no value names rank 0",
             "the dispatched batch's value from rank 0", "not an accel value file")
serialize.dump = dump

-- pad_across_processes: to the longest rank, after or before
local mine = accel.full({ rank + 1, 2 }, rank + 1)
local padded = acc:pad_across_processes(mine, { dim = 1, pad_index = -1 })
check.near(padded:size(), { 2, 2 }, 0, "padded to the longest")
if rank == 0 then
  check.near(padded, { { 1, 1 }, { -1, -1 } }, 0, "pad after")
  check.near(acc:pad_across_processes(mine, { pad_first = true }), { { 0, 0 }, { 1, 1 } }, 0, "pad first")
else
  acc:pad_across_processes(mine, { pad_first = true })
end

-- broadcast returns a copy of the source rank's value
check.near(acc:broadcast(accel.full({ 2 }, rank * 5), 1), { 5, 5 }, 0, "broadcast from rank 1")

-- split_between_processes: contiguous shares, first ranks take the extra
local share = acc:split_between_processes({ "a", "b", "c" })
check.equal(table.concat(share, ","), rank == 0 and "a,b" or "c", "list split")
local padded_share = acc:split_between_processes({ "a", "b", "c" }, { apply_padding = true })
check.equal(#padded_share, 2, "apply_padding evens the shares")
check.equal(padded_share[2], rank == 0 and "b" or "c", "padding repeats the last element")
local rows = acc:split_between_processes(accel.arange(5))
check.near(rows, rank == 0 and { 0, 1, 2 } or { 3, 4 }, 0, "tensor rows split")
local dict = acc:split_between_processes({ x = accel.arange(4), y = accel.arange(4) * 10 })
check.near(dict.y, rank == 0 and { 0, 10 } or { 20, 30 }, 0, "tables of tensors split alike")

-- main_process_first: the main process finishes before the others start
local path = os.getenv("TMPDIR") or "/tmp"
local marker = path .. "/accel-main-first-" .. (os.getenv("MASTER_PORT") or "0")
acc:main_process_first(function()
  if rank == 0 then
    local f = io.open(marker, "w"); f:write("done"); f:close()
  else
    local f = io.open(marker, "r")
    check.truthy(f ~= nil, "rank 1 runs after the main process wrote its file")
    if f then f:close() end
  end
end)
acc:wait_for_everyone()
if rank == 0 then os.remove(marker) end

check.equal(acc:on_main_process(function() return "ran" end), rank == 0 and "ran" or nil, "on_main_process")

-- triggers: one rank's set_trigger is seen by all
check.equal(acc:check_trigger(), false, "no trigger yet")
if rank == 1 then acc:set_trigger() end
check.equal(acc:check_trigger(), true, "rank 1's trigger seen everywhere")
check.equal(acc:check_trigger(), false, "the trigger resets")

-- set_seed: the same stream on every rank, or a per-rank one
accel.set_seed(11)
local same = acc:gather(accel.rand(1))
check.near(same[1], same[2], 0, "set_seed: same numbers on every rank")
accel.set_seed(11, { device_specific = true })
local different = acc:gather(accel.rand(1))
check.truthy(different[1]:item() ~= different[2]:item(), "device_specific seeds differ per rank")
accel.set_seed(11)
local a = math.random()
accel.set_seed(11)
check.equal(math.random(), a, "set_seed seeds math.random too")

-- find_executable_batch_size halves on real allocation failures
local tried = {}
local found = accel.find_executable_batch_size(function(batch_size)
  tried[#tried + 1] = batch_size
  -- From 16 up, ask for terabytes: the allocator really fails.
  local bytes = batch_size >= 16 and batch_size * 2 ^ 40 or batch_size * 1024
  local block = accel.empty(bytes, { dtype = accel.uint8 })
  return batch_size, block:numel()
end, 64)
check.equal(found, 8, "the largest batch size that fits")
check.equal(tried[1], 64, "started at 64")
check.equal(tried[2], 32, "halved after running out of memory")
check.raises(function()
  accel.find_executable_batch_size(function() error("not memory related") end, 8)
end, "other errors pass through", "not memory related")

-- the logger writes once, from the main process
local log = accel.get_logger("test")
log:info("rank %d logs this only on the main process", rank)
check.raises(function() accel.get_logger("x", "verbose") end, "bad level", "verbose")

acc:end_training()
check.done("test_accelerator_utilities")
