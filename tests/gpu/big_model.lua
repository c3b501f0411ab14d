-- Big-model loading onto a GPU (tests/gpu/test_gpu_big_model.sh): the
-- same checkpoint dispatched whole onto GPU 0 by device_map = "auto" (no
-- max_memory: every GPU's free memory, as Accelerate's), and across GPU 0,
-- the CPU and disk by a table map, gives the CPU model's outputs, on the
-- device of the input.
local here = arg[0]:match("(.*/)")
local check = dofile(here .. "../lua/helpers/check.lua")
local big_model = dofile(here .. "../lua/helpers/big_model.lua")
local ck = require("accel.core").formats
local folder = arg[1] or error("usage: big_model.lua FOLDER")

accel.set_seed(3)
local reference = big_model.build()
local ids = big_model.ids()
local function run(model) return accel.no_grad(function() return model(ids) end) end
local expected = run(reference)
big_model.save(reference, folder)

local function close(got, what)
  check.equal(got.device, "cpu", what .. ": the output is on the input's device")
  local worst = (got:double() - expected:double()):abs():max():item()
  check.truthy(worst < 1e-4, what .. ": largest difference from the CPU model " .. worst)
end

local whole = accel.init_empty_weights(big_model.build)
local _, map = accel.load_checkpoint_and_dispatch(whole, folder, { device_map = "auto" })
check.equal(map[""], "cuda:0", "auto without max_memory puts the whole model on GPU 0")
check.equal(whole.blocks[2].fc1.weight.device, "cuda:0", "a weight is on GPU 0")
close(run(whole), "whole on GPU 0")

local spread = accel.init_empty_weights(big_model.build)
accel.load_checkpoint_and_dispatch(spread, folder, {
  device_map = { embed = 0, positions = 0, head = 0, ["blocks.1"] = 0, ["blocks.2"] = "cpu", ["blocks.3"] = "disk" },
})
check.equal(spread.blocks[1].fc1.weight.device, "cuda:0", "blocks.1 on GPU 0")
check.equal(spread.blocks[2].fc1.weight.device, "cpu", "blocks.2 on the CPU")
check.equal(spread.blocks[3].fc1.weight.device, "meta", "blocks.3 on disk between forwards")
close(run(spread), "across GPU 0, the CPU and disk")
check.equal(spread.blocks[3].fc1.weight.device, "meta", "blocks.3 back on disk after its forward")

local free, total = accel.cuda.mem_get_info(0)
check.truthy(free > 0 and free <= total, "mem_get_info gives free <= total bytes")
ck.remove_folder(folder)
check.done("gpu big model")
