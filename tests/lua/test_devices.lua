-- Devices where there is no GPU (every CI machine): accel.cuda says so, each
-- way of asking for a GPU fails with a message naming what asked and why,
-- the Accelerator computes on the CPU, and moving a model keeps its
-- parameters' identity. tests/gpu/ checks the same surface on a GPU.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local amp = require("accel.core").amp
local nn, F = accel.nn, accel.nn.functional

check.equal(accel.cuda.is_available(), false, "no GPU is visible")
check.equal(accel.cuda.device_count(), 0, "device_count is 0")
check.equal(type(accel.cuda.is_built()), "boolean", "is_built answers")
for _, name in ipairs({ "synchronize", "memory_allocated", "max_memory_allocated", "empty_cache",
                        "current_device", "get_rng_state", "reset_peak_memory_stats", "mem_get_info" }) do
  check.raises(function() accel.cuda[name]() end, "accel.cuda." .. name .. " says there is no GPU",
               "no GPU here")
  local ok, err = pcall(accel.cuda[name])
  check.equal(select(2, tostring(err):gsub("accel%.cuda%." .. name .. ":", "")), 1,
              "accel.cuda." .. name .. " is named once in its error")
end

local t = accel.randn(2, 3)
check.equal(t.device, "cpu", "tensors are on the CPU")
check.equal(t.is_cuda, false, "t.is_cuda")
check.raises(function() return t:cuda() end, "t:cuda() names itself", "t:cuda(): no GPU here")
check.raises(function() return t:to("cuda:0") end, "t:to names the device", 'to("cuda:0"): no GPU here')
check.raises(function() return t:to("cuda:1", true) end, "a non-blocking copy too", 'to("cuda:1"): no GPU here')
check.raises(function() return accel.zeros(2, { device = "cuda" }) end, "creation options name the option",
             "option 'device': no GPU here")
check.raises(function() return t:pin_memory() end, "pinning needs a GPU", "t:pin_memory(): no GPU here")
check.equal(t:is_pinned(), false, "nothing is pinned")
check.equal(t:to("cpu"):equal(t), true, "to('cpu') is fine")

local acc = accel.Accelerator{}
check.equal(acc.device, "cpu", "the Accelerator computes on the CPU")
check.equal(acc.distributed_type, "NO", "one rank: distributed_type NO")
check.equal(accel.Accelerator{ cpu = true }.device, "cpu", "cpu = true is accepted")
check.equal(accel.PartialState{ cpu = true }.device, "cpu", "and by PartialState")

-- Autocast takes a device; only cpu and cuda have one.
local out = amp.autocast(function() return t:matmul(t:t()) end, "bfloat16", "cpu")
check.equal(out.dtype, "bfloat16", "CPU autocast computes matmuls in bf16")
check.raises(function() amp.autocast(function() end, "bfloat16", "mps") end, "autocast names the device",
             "autocast runs on cpu or cuda, not 'mps'")

-- Module:to moves parameters in place: an optimizer made before holds them.
accel.set_seed(0)
local model = nn.Linear(3, 2)
local opt = accel.optim.SGD(model:parameters(), { lr = 0.5 })
local weight = model.weight
model:to("float64")
check.equal(model.weight.dtype, "float64", "the parameters are float64")
check.truthy(rawequal(model.weight, weight), "the parameter is the same tensor after the move")
local before = model.weight:detach():clone()
F.mse_loss(model(accel.randn(4, 3):double()), accel.zeros(4, 2):double()):backward()
opt:step()
check.truthy(not model.weight:detach():equal(before), "the optimizer made before the move updates the model")
check.equal(model.weight.grad.dtype, "float64", "gradients follow")
model:to("float32")
check.equal(model.weight.grad.dtype, "float32", "a gradient present at the move moves with its parameter")
check.done("devices without a GPU")
