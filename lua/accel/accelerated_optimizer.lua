-- An optimizer prepared by an Accelerator: step and zero_grad do nothing on
-- micro-steps that do not synchronise gradients, and with fp16 a step whose
-- gradients overflowed is skipped; both facts come from the Accelerator's
-- GradientState. `updates` counts the steps really taken.
local host_action = require("accel.host_action")

local AcceleratedOptimizer = {}
AcceleratedOptimizer.__index = AcceleratedOptimizer

function AcceleratedOptimizer.new(optimizer, gradient_state)
  return setmetatable({
    gradient_state = gradient_state,
    optimizer = optimizer,
    param_groups = optimizer.param_groups,  -- the optimizer's own, read and written through
    updates = 0,
    step_was_skipped = false,
    _hooks = {},  -- the layouts whose shards the optimizer steps (parallel/model_layout.lua)
  }, AcceleratedOptimizer)
end

-- `hooks` (a ModelLayout's optimizer_hooks) run around each step and
-- zero_grad: a sharded model's gradient slices are taken before the step
-- and its updated shards gathered into every rank's parameters after it;
-- the first gives and takes the optimizer's state.
function AcceleratedOptimizer:_add_hooks(hooks)
  self._hooks[#self._hooks + 1] = hooks
end

function AcceleratedOptimizer:step()
  local state = self.gradient_state
  if not state.sync_gradients then return end
  if state:_overflowed() then
    self.step_was_skipped = true
    return
  end
  if self.live and self.live:skips_step(self) then self.step_was_skipped = true return end  -- live/spike_guard.lua
  self.step_was_skipped = false
  for _, hooks in ipairs(self._hooks) do hooks:before_step() end
  self.optimizer:step()
  for _, hooks in ipairs(self._hooks) do hooks:after_step() end
  -- Inside a CUDA graph's capture the count is kept for each replay.
  host_action(state, function() self.updates = self.updates + 1 end)
end

function AcceleratedOptimizer:zero_grad(set_to_none)
  if not self.gradient_state.sync_gradients then return end
  self.optimizer:zero_grad(set_to_none)
  for _, hooks in ipairs(self._hooks) do hooks:zero_grad(set_to_none) end
  if self.live then self.live:boundary(self) end  -- control chunks run here (live/control.lua)
end

-- The rest is the optimizer's own.
for _, name in ipairs({ "option", "set_option", "num_param_groups", "params", "name", "implementation" }) do
  AcceleratedOptimizer[name] = function(self, ...) return self.optimizer[name](self.optimizer, ...) end
end

-- Sharded, the state is given and taken in the layout of the optimizer
-- before sharding, as plain data parallel saves it (a collective: call it
-- on every rank). Under ep a recipe's call is refused (each rank's state
-- holds its own experts under its own indices); checkpoints take it
-- through _rank_state_dict and key it by name
-- (parallel/checkpoint/expert_checkpoint.lua).
function AcceleratedOptimizer:_rank_state_dict()
  local hooks = self._hooks[1]
  if hooks then return hooks:optimizer_state_dict(self.optimizer) end
  return self.optimizer:state_dict()
end

function AcceleratedOptimizer:_load_rank_state_dict(state)
  local hooks = self._hooks[1]
  if hooks then return hooks:load_optimizer_state_dict(self.optimizer, state) end
  self.optimizer:load_state_dict(state)
end

function AcceleratedOptimizer:state_dict()
  for _, hooks in ipairs(self._hooks) do hooks:refuse_optimizer_state("the optimizer's state_dict") end
  return self:_rank_state_dict()
end

function AcceleratedOptimizer:load_state_dict(state)
  for _, hooks in ipairs(self._hooks) do hooks:refuse_optimizer_state("the optimizer's load_state_dict") end
  self:_load_rank_state_dict(state)
end

-- Whether state_dict gathers the state from every rank's shards.
function AcceleratedOptimizer:_gathers_state()
  return #self._hooks > 0
end

return AcceleratedOptimizer
