-- exponential(opt, {gamma}): multiplies the lr by gamma every step
-- (PyTorch's ExponentialLR).
local args = require("accel.util.args")
local base = require("accel.optim.lr_scheduler.base")

local ExponentialLR = base.class("exponential")
ExponentialLR.state_keys = base.state_keys("gamma")

function ExponentialLR:get_lr()
  local out = {}
  for g = 1, self.num_groups do
    out[g] = self:current_lr(g) * (self.last_epoch == 0 and 1 or self.gamma)
  end
  return out
end

return function(opt, options)
  return base.attach(ExponentialLR, opt, function(self)
    local o = args.options(self.name, options, { gamma = args.NONE })
    if type(o.gamma) ~= "number" then args.error(self.name .. ": gamma must be a number, got " .. tostring(o.gamma)) end
    self.gamma = o.gamma
  end)
end
