-- Tensors from Lua: creation, operators, 1-based dims and indices, shape
-- ops, conversions, and errors that show the shapes.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")

-- creation: a table of numbers is the default float dtype whatever its values
-- (Lua has one number type); integers are asked for
check.equal(accel.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }).dtype, accel.float32, "integral table -> float32")
check.equal(accel.tensor({ 1.5, 2 }).dtype, accel.float32, "fractional table -> float32")
local a = accel.LongTensor({ { 1, 2, 3 }, { 4, 5, 6 } })
check.equal(a.dtype, accel.int64, "LongTensor -> int64")
check.equal(accel.tensor({ true, false }).dtype, accel.bool, "booleans -> bool")
check.near(a:size(), { 2, 3 }, 0, "size()")
check.equal(a:size(-1), 3, "size(-1) is the last dim")
check.equal(a:dim(), 2, "dim")
check.equal(a:numel(), 6, "numel")
check.near(accel.zeros(2, 3):size(), { 2, 3 }, 0, "zeros(2, 3)")
check.near(accel.ones({ 2, 3 }, { dtype = accel.float64 }):sum():item(), 6, 0, "ones({2,3}, opts)")
check.equal(accel.ones(2, { dtype = accel.float64 }).dtype, accel.float64, "dtype option")
check.near(accel.arange(5), { 0, 1, 2, 3, 4 }, 0, "arange excludes its end")
check.near(accel.arange(1, 2, 0.25), { 1, 1.25, 1.5, 1.75 }, 1e-7, "arange with step")
check.near(accel.full({ 2 }, 7), { 7, 7 }, 0, "full")
check.raises(function() accel.tensor({ { 1, 2 }, { 3 } }) end, "ragged table", "ragged")

-- operators: numbers on either side, elementwise *, true division
local f = a:float()
check.near(f + 1, { { 2, 3, 4 }, { 5, 6, 7 } }, 0, "t + n")
check.near(10 - f, { { 9, 8, 7 }, { 6, 5, 4 } }, 0, "n - t")
check.near(f * f, { { 1, 4, 9 }, { 16, 25, 36 } }, 0, "t * t is elementwise")
check.near(a / 2, { { 0.5, 1, 1.5 }, { 2, 2.5, 3 } }, 0, "int / int is true division")
check.near(-f, { { -1, -2, -3 }, { -4, -5, -6 } }, 0, "unary minus")
check.near(f ^ 2, { { 1, 4, 9 }, { 16, 25, 36 } }, 0, "power")
check.equal((a * 2).dtype, accel.int64, "int tensor * integral number stays int64")
check.near(accel.matmul(f, f:t()), { { 14, 32 }, { 32, 77 } }, 0, "matmul")

-- reductions over 1-based dims; returned indices are 1-based
check.near(f:sum(), 21, 0, "sum")
check.near(f:sum(1), { 5, 7, 9 }, 0, "sum over dim 1 (rows)")
check.near(f:sum(2), { 6, 15 }, 0, "sum over dim 2")
check.near(f:sum(-1, true):size(), { 2, 1 }, 0, "keepdim")
check.near(f:mean(2), { 2, 5 }, 0, "mean")
local values, indices = accel.tensor({ { 3, 9, 1 }, { 7, 2, 8 } }):max(2)
check.near(values, { 9, 8 }, 0, "max values")
check.near(indices, { 2, 3 }, 0, "max indices are 1-based")
check.near(accel.tensor({ 5, 1, 4 }):argmin(), 2, 0, "argmin is 1-based")
check.near(accel.tensor({ { 0.1, 0.9 }, { 0.8, 0.2 } }):argmax(-1), { 2, 1 }, 0, "argmax(-1)")
check.raises(function() f:sum(0) end, "dim 0 is refused", "1-based")

-- comparisons give bool tensors; model(x):argmax(-1):eq(y) works with 1-based y
check.near(f:gt(3), { { false, false, false }, { true, true, true } }, 0, "gt")
check.near(accel.tensor({ { 0.1, 0.9 } }):argmax(-1):eq(accel.LongTensor({ 2 })), { true }, 0, "argmax eq target")

-- shape ops with 1-based dims and positions
check.near(f:view(3, 2), { { 1, 2 }, { 3, 4 }, { 5, 6 } }, 0, "view")
check.near(f:transpose(1, 2):size(), { 3, 2 }, 0, "transpose")
check.near(f:permute({ 2, 1 }):size(), { 3, 2 }, 0, "permute")
check.near(f:unsqueeze(1):size(), { 1, 2, 3 }, 0, "unsqueeze(1) adds a first dim")
check.near(f:narrow(2, 2, 2), { { 2, 3 }, { 5, 6 } }, 0, "narrow from position 2")
check.near(f:index_select(2, accel.LongTensor({ 3, 1 })), { { 3, 1 }, { 6, 4 } }, 0, "index_select 1-based")
check.raises(function() f:index_select(1, accel.LongTensor({ 0 })) end, "index 0 refused", "1-based")
check.near(accel.cat({ f, f }, 1):size(), { 4, 3 }, 0, "cat along dim 1")
check.near(accel.stack({ f, f }, 1):size(), { 2, 2, 3 }, 0, "stack")

-- indexing: t[i] is a view of row i; assignment writes through
check.near(f[2], { 4, 5, 6 }, 0, "t[2]")
check.near(f[-1], { 4, 5, 6 }, 0, "t[-1] is the last row")
local g = f:clone()
g[1] = 0
check.near(g, { { 0, 0, 0 }, { 4, 5, 6 } }, 0, "t[1] = 0")
g[2][3] = 9
check.near(g[2], { 4, 5, 9 }, 0, "t[2][3] = 9 writes through the view")
check.near(f, { { 1, 2, 3 }, { 4, 5, 6 } }, 0, "clone copied")

-- conversions
check.equal(accel.tensor(2.5):item(), 2.5, "item")
check.equal(type(f:totable()[2]), "table", "totable nests")
check.equal(f:to(accel.float64).dtype, accel.float64, "to(dtype)")
check.equal(tostring(f), "tensor([[1., 2., 3.],\n        [4., 5., 6.]])", "tostring prints as PyTorch does")

-- errors: bad shapes and bad arguments name the function and show the shapes
local err = check.raises(function() return accel.ones(2, 3) + accel.ones(4, 5) end, "add shapes",
                         "float32[2, 3]", "float32[4, 5]")
check.truthy(err:find("test_tensor.lua:%d+:"), "error points at the test line: " .. err)
check.raises(function() return accel.matmul(accel.ones(2, 3), accel.ones(4, 5)) end, "matmul shapes",
             "accel.matmul", "2x3", "4x5")
check.raises(function() return f:view("x") end, "bad argument type", "accel.view", "argument 2", "string")
check.raises(function() return accel.ones(2):item() end, "item of many", "one element")
-- other userdata are not tensors, as plain arguments or as operands
for what, value in pairs({ file = io.stdout, proxy = newproxy(), scaler = require("accel.core").amp.LossScaler({}) }) do
  check.raises(function() return accel.matmul(f, value) end, what .. " as a tensor",
               "accel.matmul", "argument 2", "expected tensor, got userdata")
  check.raises(function() return f + value end, what .. " as an operand", "expected tensor or number, got userdata")
end
check.equal(accel.ones(3):sum():item(), 3, "the process survives errors")

check.done("test_tensor")
