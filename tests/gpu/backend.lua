-- Prints which backend and device this rank got (test_gpu_collectives.sh).
local acc = accel.Accelerator{}
print(string.format("rank %d: backend %s on %s", acc.process_index, tostring(acc.backend), acc.device))
