-- Strict globals: once accel is loaded, reading a global nobody assigned is
-- an error naming it, and so is creating a global inside a function;
-- assignments at a chunk's top level declare, as Lua's strict.lua does.
-- Chunks are loaded with a recipe-like name to check the reported line.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")

local function run(source)
  return assert(loadstring(source, "=recipe.lua"))()
end

check.raises(function() run("local model = 1\nreturn modle") end, "reading an undefined global",
             "recipe.lua:2: undefined global 'modle'")
check.raises(function() run("local function f() return nothing_here end\nreturn f()") end,
             "reading an undefined global inside a function", "recipe.lua:1: undefined global 'nothing_here'")
check.raises(function() run("local function f()\n  counter = 1\nend\nf()") end,
             "creating a global inside a function",
             "recipe.lua:2: assignment to undeclared global 'counter' inside a function")

-- top-level assignments declare; functions may then read and update them
run("declared_at_top = 5")
check.equal(declared_at_top, 5, "a top-level assignment creates the global")
run("local function bump() declared_at_top = declared_at_top + 1 end\nbump()")
check.equal(declared_at_top, 6, "a function may update a declared global")
run("maybe_later = nil")
check.equal(run("local function f() return maybe_later end\nreturn f()"), nil,
            "a global declared as nil reads as nil")

-- what recipes rely on still works
check.truthy(type(arg[0]) == "string", "arg")
check.truthy(accel.zeros ~= nil and require("accel") == accel, "accel and require('accel')")
check.equal(rawget(_G, "never_assigned"), nil, "rawget bypasses the check")
check.equal(type(print) .. type(math.floor) .. type(jit), "functionfunctiontable", "the standard globals")

check.done("test_strict_globals")
