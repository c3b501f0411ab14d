-- Returns its input unchanged: a placeholder where a layer is optional.
-- It takes no options (nn.Identity() or nn.Identity{}).
local Module = require("accel.nn.module")
local args = require("accel.util.args")

local Identity = Module:extend("Identity")

function Identity:init(options)
  args.options("nn.Identity", options, {})
end

function Identity:forward(x)
  return x
end

return Identity
