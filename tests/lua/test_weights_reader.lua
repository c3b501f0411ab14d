-- nproc: 1
-- accel.core.formats.open_weights: the tensors of a saved model, one at a
-- time, as the big-model loader reads them; its errors name what is wrong.
local here = arg[0]:match("(.*/)")
local check = dofile(here .. "helpers/check.lua")
local ck = require("accel.core").formats

local folder = "/tmp/accel_test_weights_reader_" .. (os.getenv("MASTER_PORT") or "1")
ck.remove_folder(folder)
accel.manual_seed(3)
local weight, bias = accel.randn(4, 3), accel.arange(1, 5)
ck.save_weights(folder, { { "fc.weight", weight }, { "fc.bias", bias } }, { max_shard_size = 60 })

local reader = ck.open_weights(folder)
check.equal(#reader:names(), 2, "both tensors, across two shards")
local info = reader:info("fc.weight")
check.equal(info.dtype, accel.float32, "dtype as stored")
check.equal(info.shape[1] * 10 + info.shape[2], 43, "shape {4, 3}")
check.equal(info.bytes, 48, "bytes")
check.truthy(reader:load("fc.weight"):equal(weight), "a tensor reads back equal")
local as_half = reader:load("fc.weight", accel.float16)
check.equal(as_half.dtype, accel.float16, "converted while loading")
check.truthy(as_half:equal(weight:to(accel.float16)), "converted values")
check.raises(function() reader:load("fc.nope") end, "unknown name", "holds no tensor named 'fc.nope'", folder)
reader:close()
check.raises(function() reader:names() end, "after close", "closed")
check.raises(function() ck.open_weights(folder .. "/absent") end, "missing path", folder .. "/absent")
for _, bad in ipairs({ -1, 0.5, 0 / 0, 2 ^ 70 }) do
  check.raises(function() ck.save_weights(folder .. "/bad", { { "w", weight } }, { max_shard_size = bad }) end,
               "max_shard_size " .. tostring(bad) .. " is refused, not converted", "max_shard_size must be a whole number")
end
ck.remove_folder(folder)
check.done("weights reader")
