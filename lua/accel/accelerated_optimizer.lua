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
    _sharded = {},  -- sharded models whose shards the optimizer steps
  }, AcceleratedOptimizer)
end

-- The optimizer steps `sharded`'s shards (sharding/shard_model.lua): their
-- gradient slices are taken before the step and the updated shards gathered
-- into every rank's parameters after it.
function AcceleratedOptimizer:_step_shards_of(sharded)
  self._sharded[#self._sharded + 1] = sharded
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
  for _, sharded in ipairs(self._sharded) do sharded:before_step() end
  self.optimizer:step()
  for _, sharded in ipairs(self._sharded) do sharded:after_step() end
  -- Inside a CUDA graph's capture the count is kept for each replay
  -- (cuda_graphs.lua).
  local capture = state._capture
  if capture then
    capture[#capture + 1] = function() self.updates = self.updates + 1 end
  else
    self.updates = self.updates + 1
  end
end

function AcceleratedOptimizer:zero_grad(set_to_none)
  if not self.gradient_state.sync_gradients then return end
  self.optimizer:zero_grad(set_to_none)
  for _, sharded in ipairs(self._sharded) do sharded:zero_grad(set_to_none) end
  if self.live then self.live:boundary(self) end  -- control chunks run here (live/control.lua)
end

-- The rest is the optimizer's own.
for _, name in ipairs({ "option", "set_option", "num_param_groups", "params", "name", "implementation" }) do
  AcceleratedOptimizer[name] = function(self, ...) return self.optimizer[name](self.optimizer, ...) end
end

-- Sharded, the state is given and taken in the layout of the optimizer
-- before sharding, as plain data parallel saves it (a collective: call it
-- on every rank).
function AcceleratedOptimizer:state_dict()
  local sharded = self._sharded[1]
  if sharded then return sharded:full_optimizer_state(self.optimizer) end
  return self.optimizer:state_dict()
end

function AcceleratedOptimizer:load_state_dict(state)
  local sharded = self._sharded[1]
  if sharded then return sharded:load_full_optimizer_state(self.optimizer, state) end
  self.optimizer:load_state_dict(state)
end

return AcceleratedOptimizer
