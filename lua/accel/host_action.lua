-- The CUDA-graph capture seam: a host-side action of a step (a counter,
-- the gradient state's bookkeeping, a scheduler's step) runs now, or,
-- while cuda_graphs.lua captures a step, is kept to run after each replay,
-- since a replay runs the device's work only. `gradient_state._capture`
-- is the list of kept actions during a capture. Returns fn's results when
-- it runs now, nothing when it is kept.
return function(gradient_state, fn)
  local capture = gradient_state._capture
  if capture then
    capture[#capture + 1] = fn
    return
  end
  return fn()
end
