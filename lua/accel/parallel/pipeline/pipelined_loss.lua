-- out.loss of a pipelined model in training (pipelined_model.lua): a
-- float32 0-dim tensor that stands for the batch's loss before the
-- schedule has run. acc:backward(out.loss) finds the schedule behind it
-- here, runs it (each micro-batch's forward and backward) and writes the
-- batch's loss into the tensor itself, so that out.loss, and any copy of
-- the reference a recipe kept, reads the loss afterwards. Until then it
-- holds NaN, which no loss can be mistaken for.
local core = require("accel.core")
local args = require("accel.util.args")

local pipelined_loss = {}

-- Weakly keyed: a loss the recipe dropped does not keep its batch alive.
local pending = setmetatable({}, { __mode = "k" })
local ran = setmetatable({}, { __mode = "k" })

-- A loss whose schedule `run(scale_loss)` runs at backward; run returns the
-- batch's loss.
function pipelined_loss.defer(run)
  local loss = core.tensor(0 / 0, { dtype = "float32" })
  pending[loss] = run
  return loss
end

-- Whether `loss` is a pipelined model's out.loss still waiting for backward.
function pipelined_loss.is_pending(loss)
  return pending[loss] ~= nil
end

-- Runs the schedule behind `loss`: each micro-batch's backward on
-- scale_loss(its loss); then `loss` holds the batch's loss.
function pipelined_loss.backward(loss, scale_loss)
  local run = pending[loss]
  pending[loss] = nil
  ran[loss] = true
  local value = run(scale_loss)
  core.no_grad(function() loss:copy_(value) end)
end

-- Refuses acc:backward(t) of a tensor that is not a waiting out.loss
-- while a pipelined model's loss waits (the recipe gave a loss computed
-- from it, or another model's), and a second backward of one out.loss.
function pipelined_loss.check_plain(t)
  if ran[t] then
    args.error("Accelerator:backward: this out.loss of a pipelined model has already run its schedule; call the "
               .. "model again for the next batch")
  end
  if next(pending) ~= nil then
    args.error("Accelerator:backward: a pipelined model's out.loss is waiting for its schedule, and this is another "
               .. "tensor: give acc:backward the out.loss itself (the schedule computes the loss and its gradients "
               .. "micro-batch by micro-batch; a loss computed from out.loss has no gradient)")
  end
end

return pipelined_loss
