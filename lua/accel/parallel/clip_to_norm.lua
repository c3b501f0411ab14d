-- Clipping to a global norm some ranks computed together (tensor
-- parallelism's, a pipeline's): the gradient of every tensor in `holders`
-- (parameters, or a sharded model's shards, whose gradients are slices)
-- scaled by max_norm / (norm + 1e-6) when that is below 1, as
-- torch.nn.utils.clip_grad_norm_ scales them. Returns the norm.
local core = require("accel.core")

return function(holders, max_norm, norm)
  local coefficient = (max_norm / (norm + 1e-6)):clamp(nil, 1.0)
  core.no_grad(function()
    for _, p in ipairs(holders) do
      if p.grad then p.grad:mul_(coefficient:to(p.grad.dtype)) end
    end
  end)
  return norm
end
