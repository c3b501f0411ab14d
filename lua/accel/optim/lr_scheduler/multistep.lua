-- multistep(opt, {milestones, gamma = 0.1}): multiplies the lr by gamma at
-- each milestone step (PyTorch's MultiStepLR; a milestone listed twice
-- multiplies twice).
local args = require("accel.util.args")
local base = require("accel.optim.lr_scheduler.base")

local MultiStepLR = base.class("multistep")
MultiStepLR.state_keys = base.state_keys("milestones", "gamma")

function MultiStepLR:get_lr()
  local hits = 0
  for _, m in ipairs(self.milestones) do
    if m == self.last_epoch then hits = hits + 1 end
  end
  local out = {}
  for g = 1, self.num_groups do out[g] = self:current_lr(g) * (hits > 0 and self.gamma ^ hits or 1) end
  return out
end

return function(opt, options)
  return base.attach(MultiStepLR, opt, function(self)
    local o = args.options(self.name, options, { milestones = args.NONE, gamma = 0.1 })
    if type(o.milestones) ~= "table" then
      args.error(self.name .. ": milestones must be a table of step numbers, got " .. tostring(o.milestones))
    end
    for i, m in ipairs(o.milestones) do args.positive_integer(self.name, "milestones[" .. i .. "]", m) end
    self.milestones, self.gamma = o.milestones, o.gamma
  end)
end
