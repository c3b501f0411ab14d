-- What one AdamW training step of the benchmark's model (4 layers) keeps in
-- memory for the model states (weights, gradients, AdamW's moments), with the
-- weights in DTYPE, measured as the growth of the process's resident memory
-- over the step (the batch's activations are 8 rows, under 1 MiB), for
-- estimate-memory's stage-0 figure:
--   accel-run bench/big_model/train_memory.lua -- DTYPE
local build = dofile(arg[0]:match("(.*/)") .. "model.lua")
local dtype = arg[1] or "float32"
local status_kib = dofile(arg[0]:match("(.*/)") .. "../workloads/bench.lua").status_kib
local function resident_bytes() return status_kib("VmRSS") * 1024 end

collectgarbage()
local before = resident_bytes()
-- Made in DTYPE from the start: a float32 model converted afterwards would
-- leave its float32 pages with the allocator.
accel.set_default_dtype(dtype)
local model = build()
local opt = accel.optim.AdamW(model:parameters(), { lr = 1e-3 })
local x = accel.randn(8, 4096)
model(x):float():pow(2):mean():backward()
opt:step()
x = nil
collectgarbage()
collectgarbage()
-- The step's temporaries (AdamW's per-parameter scratch) go back to the
-- system, so what stays resident is what the step keeps.
accel.release_pooled_blocks()
print(string.format("training step, %s: resident memory grew %.2f MiB", dtype, (resident_bytes() - before) / 2 ^ 20))
