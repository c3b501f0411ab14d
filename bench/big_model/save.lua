-- Writes the benchmark's checkpoint as save_model does (2 GB shards):
--   accel-run bench/big_model/save.lua -- FOLDER
local build = dofile(arg[0]:match("(.*/)") .. "model.lua")
local folder = arg[1] or error("usage: accel-run bench/big_model/save.lua -- FOLDER")
accel.set_seed(0)
local model = build()
local acc = accel.Accelerator()
acc:save_model(model, folder)
print(string.format("saved %d parameters in %s", model:num_parameters(), folder))
