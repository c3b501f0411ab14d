-- reduce_scatter and all_gather_into on this rank's device
-- (test_gpu_collectives.sh): over NCCL on one rank, and between ranks
-- sharing one GPU through host copies. Prints "flat collectives ok on
-- DEVICE" on every rank; errors on a failure.
local dist = require("accel.core").dist
local acc = accel.Accelerator{}
local rank, world, device = acc.process_index, acc.num_processes, acc.device

local function expect(what, ok)
  if not ok then error("FAILED: " .. what, 0) end
end

for _, dtype in ipairs({ accel.float32, accel.bfloat16 }) do
  local n = 1001
  -- Rank q's element i is (i mod 50) + q, which bfloat16 sums exactly.
  local input = (accel.arange(world * n):remainder(50) + rank):to(dtype):to(device)
  local shard = accel.empty({ n }, { dtype = dtype, device = device })
  dist.reduce_scatter(shard, input)
  local expected = accel.arange(rank * n, (rank + 1) * n):remainder(50) * world + world * (world - 1) / 2
  expect("reduce_scatter of " .. dtype, shard.device == device and shard:cpu():equal(expected:to(dtype)))

  local flat = accel.zeros({ world * n }, { dtype = dtype, device = device })
  local mine = flat:narrow(1, rank * n + 1, n)
  mine:copy_((accel.arange(n):remainder(50) + rank):to(dtype):to(device))
  dist.all_gather_into(flat, mine)
  for q = 0, world - 1 do
    expect("all_gather_into in place of " .. dtype .. ", rank " .. q,
           flat:narrow(1, q * n + 1, n):cpu():equal((accel.arange(n):remainder(50) + q):to(dtype)))
  end
end
print(string.format("flat collectives ok on %s (rank %d)", device, rank))
