-- The state of gradient synchronisation, as Accelerate's GradientState:
-- what the Accelerator decides for each micro-step and what the prepared
-- data loaders tell it about the batch being processed. The Accelerator,
-- its prepared optimizers and checkpointing share one.
--
-- Synchronisation (the Accelerator writes these through the methods below):
--   sync_gradients: whether the current micro-step's backward synchronises
--     gradients (and the prepared optimizer steps).
--   num_steps: micro-steps per update (gradient_accumulation_steps).
--   sync_with_dataloader: whether a loader's last batch ends an update.
--   micro_step: micro-steps counted towards the next update.
--   sync_steps: synchronised steps so far.
--   items: what backward{num_items} counted since the last synchronisation.
--   scaler: the fp16 loss scaler (accel.core.amp.LossScaler), or nil.
-- state_dict() and load_state_dict() carry the counters, the flag and the
-- scaler's state through checkpoints.
--
-- Loaders: a stack of the loaders whose epoch is being iterated, the
-- innermost (the one that returned the latest batch) on top. A loader
-- iterated inside another loader's loop (an eval loop inside the training
-- loop) is pushed on iter() and popped when its epoch ends, and the outer
-- loader's facts are current again: at the outer loader's last batch,
-- end_of_dataloader is true again after the inner loop.
--
-- Fields (read them; the loaders write them through the methods below):
--   active_loader (also active_dataloader): the loader on top, or nil.
--   in_dataloader: whether any prepared loader's epoch is being iterated.
--   end_of_dataloader: true while the active loader's last batch of the
--     epoch is current.
--   batch_padding = {p_0, ..., p_(W-1)}: how many rows at the tail of each
--     rank's current batch of the active loader are padding duplicates (the
--     same on every rank); nil when the active loader has no current batch.
--   remainder: the padding rows of the current batch over all ranks
--     (the sum of batch_padding), 0 without a current batch.
--
-- The loaders' side (data/dataloader.lua):
--   state:_add_dataloader(loader): an epoch of `loader` starts (pushed, no
--     current batch yet).
--   state:_set_batch(loader, last, padding): `loader` returned a batch. A
--     loader above it on the stack was left (its loop ended with break) and
--     is dropped; a loader not on the stack is pushed.
--   state:_remove_dataloader(loader): its epoch ended or was abandoned; it
--     and any loader above it leave the stack.
local args = require("accel.util.args")

local GradientState = {}
GradientState.__index = GradientState

local function refresh(self)
  local top = self._stack[#self._stack]
  if top then
    self.active_loader = top.loader
    self.end_of_dataloader = top.last
    self.batch_padding = top.padding
  else
    self.active_loader = nil
    self.end_of_dataloader = false
    self.batch_padding = nil
  end
  self.active_dataloader = self.active_loader
  self.in_dataloader = top ~= nil
  local remainder = 0
  for _, p in ipairs(self.batch_padding or {}) do remainder = remainder + p end
  self.remainder = remainder
end

-- GradientState{num_steps = 1, sync_with_dataloader = true, scaler = nil}
local function new(_, options)
  local o = args.options("accel.GradientState", options, { num_steps = 1, sync_with_dataloader = true, scaler = false },
                         { num_steps = "number", sync_with_dataloader = "boolean", scaler = "userdata" })
  local self = setmetatable({
    _stack = {},
    sync_gradients = true,
    num_steps = o.num_steps,
    sync_with_dataloader = o.sync_with_dataloader,
    micro_step = 0,
    sync_steps = 0,
    items = 0,
    scaler = o.scaler or nil,
  }, GradientState)
  refresh(self)
  return self
end

function GradientState.is(value)
  return getmetatable(value) == GradientState
end

-- The position of `loader` on the stack, or nil.
local function position(self, loader)
  for i = #self._stack, 1, -1 do
    if self._stack[i].loader == loader then return i end
  end
end

local function truncate(self, n)
  for i = #self._stack, n + 1, -1 do self._stack[i] = nil end
end

function GradientState:_add_dataloader(loader)
  local i = position(self, loader)
  if i then truncate(self, i - 1) end
  self._stack[#self._stack + 1] = { loader = loader, last = false, padding = nil }
  refresh(self)
end

function GradientState:_set_batch(loader, last, padding)
  local i = position(self, loader)
  if i then
    truncate(self, i)
  else
    i = #self._stack + 1
    self._stack[i] = { loader = loader }
  end
  self._stack[i].last, self._stack[i].padding = last, padding
  refresh(self)
end

function GradientState:_remove_dataloader(loader)
  local i = position(self, loader)
  if not i then return end
  truncate(self, i - 1)
  refresh(self)
end

-- Synchronisation -------------------------------------------------------

-- A micro-step of accumulation begins: it synchronises every num_steps
-- micro-steps, and at a loader's last batch.
function GradientState:_begin_micro_step()
  self.micro_step = self.micro_step + 1
  local end_of_data = self.sync_with_dataloader and self.end_of_dataloader
  self.sync_gradients = end_of_data or self.micro_step % self.num_steps == 0
  if end_of_data then self.micro_step = 0 end
end

function GradientState:_add_items(n)
  self.items = self.items + n
end

-- A synchronisation is done: returns the items it covered and starts counting anew.
function GradientState:_finish_sync()
  local items = self.items
  self.items = 0
  self.sync_steps = self.sync_steps + 1
  self._unscaled_at = nil
  return items
end

-- fp16 ----------------------------------------------------------------------
-- The gradients of `parameters` (the prepared models', set by the
-- Accelerator) are divided by the loss scale once per synchronised step,
-- before clipping or stepping, and the scale is updated once per step.

function GradientState:_set_parameters(parameters)
  self._parameters = parameters
end

function GradientState:_unscale()
  if not self.scaler or self._unscaled_at == self.sync_steps then return end
  self._found_inf = self.scaler:unscale(self._parameters or {})
  -- Sharded gradients: each rank looked at its slices only.
  if self._agree_overflow then self._found_inf = self._agree_overflow(self._found_inf) end
  self._unscaled_at = self.sync_steps
end

-- Whether this step's update must be skipped (an fp16 overflow).
function GradientState:_overflowed()
  if not self.scaler then return false end
  self:_unscale()
  if self._scaled_at ~= self.sync_steps then
    self.scaler:update(self._found_inf)
    self._scaled_at = self.sync_steps
  end
  return self._found_inf
end

function GradientState:state_dict()
  local state = { micro_step = self.micro_step, sync_steps = self.sync_steps, items = self.items,
                  sync_gradients = self.sync_gradients }
  if self.scaler then
    state.scaler = { scale = self.scaler:scale(), growth_tracker = self.scaler:growth_tracker() }
  end
  return state
end

function GradientState:load_state_dict(state)
  self.micro_step, self.sync_steps, self.items = state.micro_step, state.sync_steps, state.items
  self.sync_gradients = state.sync_gradients
  -- Counters may go back in time: the next step unscales and updates anew.
  self._unscaled_at, self._scaled_at = nil, nil
  if self.scaler and state.scaler then self.scaler:load(state.scaler.scale, state.scaler.growth_tracker) end
end

-- Loaders ---------------------------------------------------------------

-- The loaders being iterated, outermost first.
function GradientState:dataloaders()
  local out = {}
  for i, entry in ipairs(self._stack) do out[i] = entry.loader end
  return out
end

function GradientState:__tostring()
  return string.format("GradientState(sync_gradients %s, %d active loader(s), end_of_dataloader %s)",
                       tostring(self.sync_gradients), #self._stack, tostring(self.end_of_dataloader))
end

return setmetatable(GradientState, { __call = new })
