-- A pipelined model's gradient synchronisation (the GradientSync seam,
-- engine/parallel/gradient_sync.h, which the Accelerator's backward drives):
-- data parallel's reducer over the stage's parameters and the mesh's dp
-- group (the ranks holding the same stages), kept off while the schedule
-- runs its backward passes -- one per micro-batch, each reaching every
-- parameter of the stage, which the reducer's hooks would take for a
-- second gradient in one backward -- and run once the schedule is done:
-- finalize all-reduces the accumulated gradients over dp and divides them
-- by the items counted (or the dp ranks), as on a synchronised step of
-- gradient accumulation.
local PipelineSync = {}
PipelineSync.__index = PipelineSync

function PipelineSync.new(reducer)
  reducer:set_sync(false)
  return setmetatable({ reducer = reducer, synchronises = true }, PipelineSync)
end

function PipelineSync:set_sync(sync) self.synchronises = sync end
function PipelineSync:sync() return self.synchronises end
-- The schedule's backward passes are the Accelerator's to end, always.
function PipelineSync:caller_finishes_backward() end
function PipelineSync:end_backward() end

function PipelineSync:finalize(num_items)
  if not self.synchronises then return end
  self.reducer:set_sync(true)
  local ok, err = pcall(self.reducer.finalize, self.reducer, num_items or 0)
  self.reducer:set_sync(false)
  if not ok then error(err, 0) end
end

return PipelineSync
