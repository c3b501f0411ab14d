-- accel.is_tensor tells the engine's tensors from everything else by their
-- handle (a table or userdata with a dtype field is not one), and
-- accel.tensor_tree walks tensors in nested plain tables: map rebuilds the
-- tables with each tensor replaced, each visits tensors until one answers.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local tensor_tree = require("accel.tensor_tree")

local t = accel.ones(2)
check.equal(accel.is_tensor(t), true, "a tensor is a tensor")
check.equal(accel.is_tensor({ dtype = "float32", device = "cpu" }), false, "a table with a dtype is not")
check.equal(accel.is_tensor(io.stdout), false, "other userdata is not")
check.equal(accel.is_tensor(1), false, "a number is not")
check.equal(accel.is_tensor(nil), false, "nil is not")
check.equal(accel.is_tensor(accel.nn.Linear(2, 2)), false, "a module is not")

local layer = accel.nn.Linear(2, 2)
local batch = { x = t, pair = { t * 2, "label", 3 }, layer = layer }
local doubled = tensor_tree.map(batch, function(v) return v * 10 end)
check.near(doubled.x, { 10, 10 }, 0, "map replaces a tensor")
check.near(doubled.pair[1], { 20, 20 }, 0, "map walks nested plain tables")
check.equal(doubled.pair[2], "label", "map keeps strings")
check.equal(doubled.pair[3], 3, "map keeps numbers")
check.truthy(rawequal(doubled.layer, layer), "map keeps an object with a metatable whole")
check.truthy(not rawequal(doubled.pair, batch.pair), "map rebuilds plain tables")
check.near(batch.x, { 1, 1 }, 0, "map leaves the caller's tensors alone")
check.near(tensor_tree.map(t, function(v) return v + 1 end), { 2, 2 }, 0, "map of a tensor alone")

local seen = {}
check.equal(tensor_tree.each({ "a", { accel.zeros(1), accel.ones(3) } }, function(v)
  seen[#seen + 1] = v:numel()
  if v:numel() == 3 then return "found" end
end), "found", "each returns the first answer")
check.near(seen, { 1, 3 }, 0, "each visits an array's tensors in order")
check.equal(tensor_tree.each({ 1, "x", {} }, function() return true end), nil, "each of no tensors is nil")
check.done("test_tensor_tree")
