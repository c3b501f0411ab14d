-- What the prepared data loaders tell the Accelerator about the batch being
-- processed, as Accelerate's GradientState: a stack of the loaders whose
-- epoch is being iterated, the innermost (the one that returned the latest
-- batch) on top. A loader iterated inside another loader's loop (an eval
-- loop inside the training loop) is pushed on iter() and popped when its
-- epoch ends, and the outer loader's facts are current again: at the outer
-- loader's last batch, end_of_dataloader is true again after the inner loop.
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

local function new()
  local self = setmetatable({ _stack = {} }, GradientState)
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

-- The loaders being iterated, outermost first.
function GradientState:dataloaders()
  local out = {}
  for i, entry in ipairs(self._stack) do out[i] = entry.loader end
  return out
end

function GradientState:__tostring()
  return string.format("GradientState(%d active loader(s), end_of_dataloader %s)", #self._stack,
                       tostring(self.end_of_dataloader))
end

return setmetatable(GradientState, { __call = new })
