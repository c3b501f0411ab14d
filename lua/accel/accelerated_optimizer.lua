-- An optimizer prepared by an Accelerator: step and zero_grad do nothing on
-- micro-steps that do not synchronise gradients, and with fp16 a step whose
-- gradients overflowed is skipped; both facts come from the Accelerator's
-- GradientState. `updates` counts the steps really taken.
local AcceleratedOptimizer = {}
AcceleratedOptimizer.__index = AcceleratedOptimizer

function AcceleratedOptimizer.new(optimizer, gradient_state)
  return setmetatable({
    gradient_state = gradient_state,
    optimizer = optimizer,
    updates = 0,
    step_was_skipped = false,
  }, AcceleratedOptimizer)
end

function AcceleratedOptimizer:step()
  local state = self.gradient_state
  if not state.sync_gradients then return end
  if state:_overflowed() then
    self.step_was_skipped = true
    return
  end
  self.step_was_skipped = false
  self.optimizer:step()
  self.updates = self.updates + 1
end

function AcceleratedOptimizer:zero_grad(set_to_none)
  if not self.gradient_state.sync_gradients then return end
  self.optimizer:zero_grad(set_to_none)
end

-- The rest is the optimizer's own.
for _, name in ipairs({ "option", "set_option", "num_param_groups", "params", "name" }) do
  AcceleratedOptimizer[name] = function(self, ...) return self.optimizer[name](self.optimizer, ...) end
end

function AcceleratedOptimizer:state_dict()
  return self.optimizer:state_dict()
end

function AcceleratedOptimizer:load_state_dict(state)
  self.optimizer:load_state_dict(state)
end

return AcceleratedOptimizer
