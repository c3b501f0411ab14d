-- accel.nn: layers as modules, and nn.functional.
local core = require("accel.core")

local nn = {}
nn.Module = require("accel.nn.module")
nn.Linear = require("accel.nn.linear")
nn.Sequential = require("accel.nn.sequential")
for name, cls in pairs(require("accel.nn.activations")) do nn[name] = cls end

nn.functional = core.functional

return nn
