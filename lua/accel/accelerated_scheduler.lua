-- A learning-rate schedule prepared by an Accelerator advances exactly once
-- per optimizer update, whatever the number of ranks and however often the
-- recipe calls step(): calls on micro-steps without an update, and updates
-- skipped by the fp16 loss scaler, do not move it.
local host_action = require("accel.host_action")

local AcceleratedScheduler = {}
AcceleratedScheduler.__index = AcceleratedScheduler

function AcceleratedScheduler.new(scheduler, optimizer)
  return setmetatable({ scheduler = scheduler, optimizer = optimizer, seen = optimizer.updates },
                      AcceleratedScheduler)
end

function AcceleratedScheduler:step(...)
  -- Inside a CUDA graph's capture, the step is kept for after each replay,
  -- when the optimizer's update has been counted (host_action.lua).
  local n, given = select("#", ...), { ... }
  return host_action(self.optimizer.gradient_state, function()
    if self.optimizer.updates == self.seen then return end
    self.seen = self.optimizer.updates
    return self.scheduler:step(unpack(given, 1, n))
  end)
end

function AcceleratedScheduler:get_last_lr()
  return self.scheduler:get_last_lr()
end

function AcceleratedScheduler:state_dict()
  return self.scheduler:state_dict()
end

function AcceleratedScheduler:load_state_dict(state)
  self.scheduler:load_state_dict(state)
  self.seen = self.optimizer.updates
end

return AcceleratedScheduler
