-- Indexing and slicing: t[i], Torch7's t[{ ... }] subscripts, index and
-- mask tensors, t:slice, for reading (views where PyTorch gives views) and
-- for assignment. Positions are 1-based, negative ones count from the end.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")

local function grid()  -- {{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}}
  return accel.arange(1, 13):view(3, 4)
end
local t = grid()

-- reading
check.near(t[2], { 5, 6, 7, 8 }, 0, "t[2] is row 2")
check.near(t[-1], { 9, 10, 11, 12 }, 0, "t[-1] is the last row")
check.equal(t[2][3]:item(), 7, "t[2][3]")
check.equal(t[{ 2, 3 }]:item(), 7, "t[{2, 3}] selects in both dims")
check.near(t[{ 2 }], t[2], 0, "t[{2}] is t[2]")
check.near(t[{ {}, 2 }], { 2, 6, 10 }, 0, "t[{ {}, 2 }] is column 2")
check.near(t[{ { 1, 2 } }], { { 1, 2, 3, 4 }, { 5, 6, 7, 8 } }, 0, "t[{ {1, 2} }] keeps rows 1..2")
check.near(t[{ { 2, 3 }, { 2, 3 } }], { { 6, 7 }, { 10, 11 } }, 0, "a range in each dim")
check.near(t[{ { 2 }, 4 }], { 8 }, 0, "{a} is a one-long range that keeps its dim")
check.near(t[{ -1, { -2, -1 } }], { 11, 12 }, 0, "negative positions count from the end")
check.near(t[{ {}, { 1, 4, 2 } }], { { 1, 3 }, { 5, 7 }, { 9, 11 } }, 0, "a range with a step")
check.near(t[{ { 2, 1 } }]:size(), { 0, 4 }, 0, "{a, a - 1} is an empty range")
check.near(t[{ {}, accel.LongTensor({ 4, 1 }) }], { { 4, 1 }, { 8, 5 }, { 12, 9 } }, 0, "an index tensor in a subscript")
check.near(t[accel.LongTensor({ 3, 1 })], { { 9, 10, 11, 12 }, { 1, 2, 3, 4 } }, 0, "an index tensor picks rows")
check.near(t[t:gt(9)], { 10, 11, 12 }, 0, "a mask selects elements")
check.near(t[accel.tensor({ true, false, true })], { { 1, 2, 3, 4 }, { 9, 10, 11, 12 } }, 0,
           "a mask over the leading dim selects rows")
check.near(t:slice(2, 2, 3), { { 2, 3 }, { 6, 7 }, { 10, 11 } }, 0, "slice(dim, first, last) includes last")
check.near(t:slice(1, -2, -1), { { 5, 6, 7, 8 }, { 9, 10, 11, 12 } }, 0, "slice from the end")
check.near(t:slice(2, 1, 4, 3), { { 1, 4 }, { 5, 8 }, { 9, 12 } }, 0, "slice with a step")
check.near(accel.slice(t, -1, 4, 4), { { 4 }, { 8 }, { 12 } }, 0, "accel.slice with a negative dim")

-- numbers and ranges give views: writing through them changes t
local view = t[{ {}, { 2, 3 } }]
view:fill_(0)
check.near(t, { { 1, 0, 0, 4 }, { 5, 0, 0, 8 }, { 9, 0, 0, 12 } }, 0, "a range is a view")
t = grid()
t:slice(1, 3, 3):zero_()
check.near(t[3], { 0, 0, 0, 0 }, 0, "slice is a view")

-- assignment
t = grid()
t[{ { 1, 2 }, {} }] = 0
check.near(t, { { 0, 0, 0, 0 }, { 0, 0, 0, 0 }, { 9, 10, 11, 12 } }, 0, "t[{ {1, 2}, {} }] = 0")
t = grid()
t[{ {}, -1 }] = accel.LongTensor({ 7, 8, 9 })
check.near(t[{ {}, 4 }], { 7, 8, 9 }, 0, "assign a tensor to a column")
t[{ 2, { 1, 2 } }] = accel.LongTensor({ -1, -2 })
check.near(t[2], { -1, -2, 7, 8 }, 0, "assign into part of a row")
t[{ { 1, 2 }, { 1, 2 } }] = accel.LongTensor({ 100, 200 })
check.near(t[{ { 1, 2 }, { 1, 2 } }], { { 100, 200 }, { 100, 200 } }, 0, "an assigned tensor broadcasts")
t = grid()
t[t:gt(10)] = -1
check.near(t[3], { 9, 10, -1, -1 }, 0, "t[mask] = number")
t[t:ge(1):logical_and(t:le(2))] = accel.LongTensor({ 50, 60 })
check.near(t[1], { 50, 60, 3, 4 }, 0, "t[mask] = tensor, in order")
t = grid()
t[{ {}, accel.LongTensor({ 1, 3 }) }] = 0
check.near(t, { { 0, 2, 0, 4 }, { 0, 6, 0, 8 }, { 0, 10, 0, 12 } }, 0, "assign a number at index positions")
t[{ 1, accel.LongTensor({ 2, 4 }) }] = accel.LongTensor({ 20, 40 })
check.near(t[1], { 0, 20, 0, 40 }, 0, "assign a tensor at index positions")
t[accel.LongTensor({ 3 })] = 7
check.near(t[3], { 7, 7, 7, 7 }, 0, "t[index] = number")
t[2][2] = 66
check.equal(t[{ 2, 2 }]:item(), 66, "t[2][2] = v writes through")
local f = accel.zeros(2, 2)
f[{ 1, 1 }] = 0.5
f[{ 2, 2 }] = true
check.near(f, { { 0.5, 0 }, { 0, 1 } }, 0, "assign numbers and booleans")

-- Bad subscripts name the entry and the value.
t = grid()
check.raises(function() return t[4] end, "row past the end", "tensor index",
             "index 4 is out of range for dim 1 of size 3")
check.raises(function() return t[0] end, "position 0", "tensor index", "1-based")
-- The error points at the recipe line that indexed, not into the engine.
local indexing_line = debug.getinfo(1, "l").currentline + 1
check.raises(function() return t[4] end, "error location", "test_tensor_subscripts.lua:" .. indexing_line .. ":")
check.raises(function() return t[{ 1, 5 }] end, "subscript position past the end", "tensor index",
             "subscript entry 2: position 5 is out of range for size 4")
check.raises(function() return t[{ {}, { 2, 5 } }] end, "range past the end", "tensor index",
             "subscript entry 2: range {2, 5} is out of bounds for size 4")
check.raises(function() return t[{ { 0, 2 } }] end, "range from 0", "range {0, 2}", "1-based")
check.raises(function() return t[{ { 3, 1 } }] end, "backwards range", "range {3, 1}")
check.raises(function() return t[{ {}, { 1, 4, 0 } }] end, "zero step", "step must be at least 1")
check.raises(function() return t[{ 1, 2, 3 }] end, "too many entries", "3 entries", "2 dims")
check.raises(function() return t[{ "a" }] end, "string entry", "subscript entry 1 is a string")
check.raises(function() return t[{ 1.5 }] end, "fractional position", "subscript entry 1 must be an integer")
check.raises(function() return t[{ {}, accel.LongTensor({ 5 }) }] end, "index past the end",
             "subscript entry 2: index 5 is out of range for size 4")
check.raises(function() return t[{ accel.LongTensor({ 1 }), accel.LongTensor({ 1 }) }] end, "two index tensors",
             "only one index tensor")
check.raises(function() return t[{ {}, accel.tensor({ 1.0, 2.0 }) }] end, "a float index tensor",
             "subscript entry 2", "integer tensor", "accel.int64", "accel.LongTensor")
check.raises(function() return t[true] end, "boolean key", "tensor index", "boolean")
check.raises(function() t[{ 1, {} }] = "x" end, "assign a string", "tensor assignment", "string")
check.raises(function() t[{ { 1, 2 } }] = accel.ones(3) end, "assign a shape that does not broadcast",
             "tensor assignment")
check.raises(function() t.shape = 3 end, "not settable", "no settable field 'shape'")
check.raises(function() return t:slice(2, 1, 5) end, "slice past the end", "accel.slice",
             "range {1, 5} is out of bounds for size 4")
check.raises(function() return t:slice(3, 1, 1) end, "slice dim", "accel.slice", "dim 3 is out of range")

check.done("test_tensor_subscripts")
