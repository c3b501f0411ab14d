-- Creation functions, dtypes and devices, and conversion to and from Lua
-- values. Expected values are hand-computed.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")

-- every dtype a creation function takes, and what it gives
for _, dtype in ipairs({ accel.float32, accel.float64, accel.bfloat16, accel.float16, accel.int32, accel.int64,
                         accel.int16, accel.int8, accel.uint8, accel.bool }) do
  local t = accel.ones(2, 3, { dtype = dtype })
  check.equal(t.dtype, dtype, "ones with dtype " .. dtype)
  check.equal(accel.zeros({ 2 }, { dtype = dtype }).dtype, dtype, "zeros with dtype " .. dtype)
  check.near(t:sum():item(), 6, 0, "ones of " .. dtype .. " sum to 6")
end
check.equal(accel.float, accel.float32, "accel.float is float32")
check.equal(accel.half, accel.float16, "accel.half is float16")
check.equal(accel.long, accel.int64, "accel.long is int64")

check.equal(accel.zeros(2).dtype, accel.float32, "float32 is the default")
check.near(accel.full({ 2, 2 }, 1.5), { { 1.5, 1.5 }, { 1.5, 1.5 } }, 0, "full")
check.equal(accel.full({ 2 }, 3, { dtype = accel.int32 }).dtype, accel.int32, "full with dtype")
check.near(accel.eye(2, 3), { { 1, 0, 0 }, { 0, 1, 0 } }, 0, "eye(n, m)")
check.near(accel.linspace(0, 1, 5), { 0, 0.25, 0.5, 0.75, 1 }, 1e-7, "linspace includes both ends")
check.near(accel.arange(3), { 0, 1, 2 }, 0, "arange(end)")
check.equal(accel.arange(3).dtype, accel.int64, "arange of integers is int64")
check.equal(accel.arange(3, { dtype = accel.float64 }).dtype, accel.float64, "arange(end, options)")
check.near(accel.arange(5, 1, -2), { 5, 3 }, 0, "arange with a negative step")
check.equal(accel.arange(0, 1, 0.5).dtype, accel.float32, "arange with a fractional step is float32")
check.equal(accel.empty(3, 4):numel(), 12, "empty")
check.equal(accel.randn(2, 2, { requires_grad = true }).requires_grad, true, "requires_grad option")

-- *_like keep shape, dtype and device unless the options say otherwise
local ints = accel.tensor({ { 1, 2, 3 } }, { dtype = accel.int64 })
check.equal(accel.zeros_like(ints).dtype, accel.int64, "zeros_like keeps the dtype")
check.near(accel.ones_like(ints), { { 1, 1, 1 } }, 0, "ones_like")
check.near(accel.full_like(ints, 7), { { 7, 7, 7 } }, 0, "full_like")
check.equal(accel.zeros_like(ints, { dtype = accel.float64 }).dtype, accel.float64, "zeros_like with a dtype")
check.near(accel.rand_like(accel.zeros(2, 5)):size(), { 2, 5 }, 0, "rand_like")
check.near(accel.randn_like(accel.zeros(4)):size(), { 4 }, 0, "randn_like")
check.equal(accel.empty_like(ints):numel(), 3, "empty_like")

-- Lua tables in and out
local nested = { { 1.5, -2 }, { 0.25, 8 } }
local t = accel.tensor(nested)
check.equal(t.dtype, accel.float32, "a fractional number makes the table float32")
check.near(t:totable(), nested, 0, "totable gives the table back")
check.near(accel.from_table(nested, { dtype = accel.float64 }), nested, 0, "from_table")
check.equal(accel.from_table({ 1, 2 }).dtype, accel.float32, "from_table of numbers is float32 as tensor is")
local bools = accel.tensor({ { true, false } }):totable()
check.equal(bools[1][2], false, "totable of bool gives booleans")
check.equal(accel.LongTensor({ 5, 6 }):totable()[2], 6, "totable of int64 gives numbers")
check.equal(type(accel.tensor(3):totable()), "number", "totable of a 0-dim tensor is a number")
check.equal(accel.tensor(3).dtype, accel.float32, "a number scalar is float32")
check.equal(accel.tensor(true).dtype, accel.bool, "a boolean scalar")
check.equal(accel.tensor({}).dtype, accel.float32, "an empty table is float32")
check.equal(accel.tensor(2, { dtype = accel.int64 }):item(), 2, "item of int64")
check.equal(accel.tensor(false):item(), false, "item of bool")

-- the dtype never follows the values: integral numbers are float, so mean works;
-- integers are asked for with a dtype or a typed constructor
local integral = accel.tensor({ 1.0, 2.0, 3.0 })
check.equal(integral.dtype, accel.float32, "integral values make a float32 tensor")
check.near(integral:mean(), 2, 0, "mean of a table of integral numbers")
check.equal(accel.tensor({ { 1, 2 } }, { dtype = accel.int64 }).dtype, accel.int64, "dtype = int64 asks for integers")
check.equal(accel.full({ 2 }, 3).dtype, accel.float32, "full of an integral number is float32")
check.equal(accel.full({ 2 }, true).dtype, accel.bool, "full of a boolean is bool")
check.equal(accel.full({ 2 }, false, { dtype = accel.float32 }).dtype, accel.float32, "full of a boolean with a dtype")
check.equal(accel.full_like(ints, 7).dtype, accel.int64, "full_like keeps an int64 dtype")
for name, dtype in pairs({ LongTensor = accel.int64, IntTensor = accel.int32, ByteTensor = accel.uint8,
                           BoolTensor = accel.bool, FloatTensor = accel.float32, DoubleTensor = accel.float64 }) do
  local typed = accel[name]({ 1, 0, 2 })
  check.equal(typed.dtype, dtype, "accel." .. name .. " gives " .. dtype)
  check.near(typed:to(accel.float64), { 1, 0, dtype == accel.bool and 1 or 2 }, 0, "accel." .. name .. " values")
end
check.equal(accel.LongTensor(3).dtype, accel.int64, "LongTensor of a number is an int64 scalar")
check.equal(accel.DoubleTensor({ 1 }, { requires_grad = true }).requires_grad, true, "typed constructors take options")
check.raises(function() accel.LongTensor({ 1 }, { dtype = accel.float32 }) end, "a typed constructor fixes its dtype",
             "accel.LongTensor", "unknown option 'dtype'")
check.equal(accel.randint(0, 5, { 3 }).dtype, accel.int64, "randint is int64")
check.equal(accel.randperm(3).dtype, accel.int64, "randperm is int64")
check.equal(accel.tensor({ 0.1, 0.9 }):argmax().dtype, accel.int64, "argmax is int64")

-- the default float dtype: what numbers, zeros, randn and full make
check.equal(accel.get_default_dtype(), accel.float32, "float32 is the default dtype")
accel.set_default_dtype(accel.float64)
check.equal(accel.get_default_dtype(), accel.float64, "set_default_dtype changes get_default_dtype")
check.equal(accel.tensor({ 1, 2 }).dtype, accel.float64, "tensor follows the default dtype")
check.equal(accel.tensor(1.5).dtype, accel.float64, "a number scalar follows the default dtype")
check.equal(accel.zeros(2).dtype, accel.float64, "zeros follows the default dtype")
check.equal(accel.randn(2).dtype, accel.float64, "randn follows the default dtype")
check.equal(accel.full({ 2 }, 3).dtype, accel.float64, "full follows the default dtype")
check.equal(accel.arange(3).dtype, accel.int64, "arange of integers stays int64")
check.equal(accel.tensor({ true }).dtype, accel.bool, "booleans stay bool")
check.raises(function() accel.set_default_dtype(accel.int64) end, "an integer default dtype is refused",
             "accel.set_default_dtype", "floating", "int64")
check.raises(function() accel.set_default_dtype("float8") end, "an unknown default dtype is refused",
             "accel.set_default_dtype", "unknown dtype 'float8'")
check.equal(accel.get_default_dtype(), accel.float64, "a refused default dtype changes nothing")
accel.set_default_dtype(accel.float32)
check.equal(accel.tensor({ 1, 2 }).dtype, accel.float32, "the default dtype set back to float32")

-- conversions
local f = accel.tensor({ 1.75, -1.75 })
check.near(f:long(), { 1, -1 }, 0, "long truncates toward zero")
check.equal(f:int().dtype, accel.int32, "int")
check.equal(f:half().dtype, accel.float16, "half")
check.equal(f:bfloat16().dtype, accel.bfloat16, "bfloat16")
check.equal(f:double().dtype, accel.float64, "double")
check.near(f:bool(), { true, true }, 0, "bool")
check.equal(f:to(accel.float16).dtype, accel.float16, "to(dtype)")
check.equal(ints:type_as(f).dtype, accel.float32, "type_as")
check.equal(f:is_floating_point(), true, "is_floating_point")
check.equal(ints:is_floating_point(), false, "is_floating_point of int64")
check.equal(f:element_size(), 4, "element_size")
check.near(accel.zeros(2, 3):stride(), { 3, 1 }, 0, "stride()")
check.equal(accel.zeros(2, 3):t():stride(1), 1, "stride(dim) of a transpose")

-- devices: the CPU is always there; a device that is not is a clear error
check.equal(f.device, "cpu", "t.device")
check.equal(accel.zeros(2, { device = "cpu" }).device, "cpu", "device option")
check.equal(f:to("cpu").device, "cpu", "to(device)")
check.equal(f:cpu().device, "cpu", "cpu()")
check.raises(function() return accel.zeros(2, { device = "gpu" }) end, "unknown device", "accel.zeros", "gpu")
check.raises(function() return accel.zeros(2, { dtype = "float8" }) end, "unknown dtype", "accel.zeros",
             "unknown dtype 'float8'", "float32")
check.raises(function() return f:to("complex") end, "unknown target", "accel.to", "'complex'")
check.raises(function() return accel.zeros(2, -1) end, "negative size", "accel.zeros", "-1")
check.raises(function() return accel.zeros({ 2, "x" }) end, "bad size", "accel.zeros", "element 2")
check.raises(function() return accel.full({ 2 }, "x") end, "fill value type", "accel.full", "string 'x'")
check.raises(function() return accel.tensor({ 1, "a" }) end, "bad element", "accel.tensor", "string")
check.raises(function() return accel.arange("a") end, "arange argument", "accel.arange", "string 'a'")
check.raises(function() return accel.ones(2, { dtype = accel.int64, requires_grad = true }) end,
             "integer tensors cannot require grad", "accel.ones", "floating point")

check.done("test_tensor_creation")
