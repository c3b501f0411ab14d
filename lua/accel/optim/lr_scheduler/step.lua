-- step(opt, {step_size, gamma = 0.1}): multiplies the lr by gamma every
-- step_size steps (PyTorch's StepLR).
local args = require("accel.util.args")
local base = require("accel.optim.lr_scheduler.base")

local StepLR = base.class("step")
StepLR.state_keys = base.state_keys("step_size", "gamma")

function StepLR:get_lr()
  local out = {}
  for g = 1, self.num_groups do
    local lr = self:current_lr(g)
    if self.last_epoch ~= 0 and self.last_epoch % self.step_size == 0 then lr = lr * self.gamma end
    out[g] = lr
  end
  return out
end

return function(opt, options)
  return base.attach(StepLR, opt, function(self)
    local o = args.options(self.name, options, { step_size = args.NONE, gamma = 0.1 })
    self.step_size = args.positive_integer(self.name, "step_size", o.step_size)
    self.gamma = o.gamma
  end)
end
