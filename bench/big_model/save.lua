-- Writes the benchmark's checkpoint as save_model does (2 GB shards):
--   accel-run bench/big_model/save.lua -- FOLDER
local build = dofile(arg[0]:match("(.*/)") .. "model.lua")
accel.set_seed(0)
local model = build()
local acc = accel.Accelerator()
acc:save_model(model, assert(arg[1], "usage: save.lua -- FOLDER"))
print(string.format("saved %d parameters in %s", model:num_parameters(), arg[1]))
