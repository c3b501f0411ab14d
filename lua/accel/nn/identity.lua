-- Returns its input unchanged: a placeholder where a layer is optional.
local Module = require("accel.nn.module")

local Identity = Module:extend("Identity")

function Identity:forward(x)
  return x
end

return Identity
