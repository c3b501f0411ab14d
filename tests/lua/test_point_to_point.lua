-- nproc: 2 4
-- Point-to-point send/recv on a process group (engine/comm/tensor_exchange.h)
-- over real ranks: blocking pairs, a ring of isend + recv (every rank sends
-- to its successor first, which blocking sends would deadlock on), receives
-- that leave the shape to the sender, several transfers in flight between
-- two ranks matching in order (waited out of order too), dtypes that Gloo
-- and MPI carry as bytes, an empty tensor, and a receive into a tensor of
-- another shape or dtype refused naming both ranks and both tensors, after
-- which the pair goes on. Run on shared memory (the default), Gloo's TCP
-- path and MPI (tests/CMakeLists.txt); tests/launch/test_point_to_point.sh
-- has the absent peer.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local acc = accel.Accelerator{}
local rank, n = acc.process_index, acc.num_processes
local ranks = {}
for r = 0, n - 1 do ranks[#ranks + 1] = r end
local g = require("accel.core").dist.new_group("p2p", ranks)
local after, before = (rank + 1) % n, (rank - 1 + n) % n

-- Blocking pairs: even ranks send first, odd ranks receive first.
local mine = accel.arange(6):reshape({ 2, 3 }):to(accel.float32) + 100 * rank
local partner = rank % 2 == 0 and rank + 1 or rank - 1
if partner < n then
  local into = accel.zeros({ 2, 3 })
  if rank % 2 == 0 then
    g:send(mine, partner)
    g:recv(into, partner)
  else
    g:recv(into, partner)
    g:send(mine, partner)
  end
  check.near(into, accel.arange(6):reshape({ 2, 3 }) + 100 * partner, 0, "blocking pair")
end

-- A ring: isend to the successor, then a blocking receive from the predecessor.
local work = g:isend(mine, after)
local got = g:recv(nil, before)
check.near(got:size(), { 2, 3 }, 0, "the sender's shape")
check.equal(got.dtype, accel.float32, "the sender's dtype")
check.near(got, accel.arange(6):reshape({ 2, 3 }) + 100 * before, 0, "ring exchange")
check.near(work:wait(), mine, 0, "wait() returns the tensor sent")

-- Several in flight to one peer, of different shapes and dtypes, the receives waited last first.
local sent = {
  accel.tensor({ rank, 2 * rank }, { dtype = accel.int64 }),
  accel.ones({ 3, 1, 2 }, { dtype = accel.bfloat16 }) * (rank + 1),
  accel.tensor({ rank % 2 == 0, true, false }),
  accel.zeros({ 0, 4 }),
  accel.tensor(rank + 0.5, { dtype = accel.float64 }),
}
local sends, receives = {}, {}
for i, t in ipairs(sent) do sends[i] = g:isend(t, after) end
for i = 1, #sent do receives[i] = g:irecv(nil, before) end
local results = {}
for i = #sent, 1, -1 do results[i] = receives[i]:wait() end
for _, w in ipairs(sends) do w:wait() end
check.near(results[1], { before, 2 * before }, 0, "int64 in order")
check.equal(results[2].dtype, accel.bfloat16, "bfloat16 travels as itself")
check.near(results[2]:to(accel.float32), accel.ones({ 3, 1, 2 }) * (before + 1), 0, "bfloat16 values")
check.near(results[3], { before % 2 == 0, true, false }, 0, "bool")
check.near(results[4]:size(), { 0, 4 }, 0, "an empty tensor's shape")
check.equal(results[5]:dim(), 0, "a 0-dim tensor")
check.near(results[5], before + 0.5, 0, "float64 scalar")

-- A receive into the wrong shape, then the wrong dtype: refused naming both, and the pair goes on.
local w1 = g:isend(accel.ones({ 4, 8 }), after)
check.raises(function() g:recv(accel.zeros({ 4, 9 }), before) end, "shape mismatch",
             "recv from rank " .. before .. " (global rank " .. before .. ") of group 'p2p'",
             "that rank sent float32[4, 8] but this rank (" .. rank .. ") receives into float32[4, 9]")
w1:wait()
local w2 = g:isend(accel.ones({ 2 }, { dtype = accel.int32 }), after)
check.raises(function() g:recv(accel.zeros({ 2 }), before) end, "dtype mismatch",
             "that rank sent int32[2] but this rank (" .. rank .. ") receives into float32[2]")
w2:wait()
local w3 = g:isend(mine * 2, after)
check.near(g:recv(accel.zeros({ 2, 3 }), before), (accel.arange(6):reshape({ 2, 3 }) + 100 * before) * 2, 0,
           "a transfer after the mismatches")
w3:wait()

-- A receive that leaves the shape to the sender makes its tensor where it is told.
local w4 = g:isend(mine, after)
local on_cpu = g:irecv(nil, before, "cpu"):wait()
check.equal(on_cpu.device, "cpu", "irecv(nil, src, device)")
check.near(on_cpu, accel.arange(6):reshape({ 2, 3 }) + 100 * before, 0, "received on the device named")
w4:wait()

check.raises(function() g:send(mine, rank) end, "to itself", "the peer must be another rank of group 'p2p'")
check.raises(function() g:recv(nil, n) end, "out of the group", "recv from rank " .. n)
acc:wait_for_everyone()
check.done("point-to-point")
