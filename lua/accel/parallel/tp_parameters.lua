-- What tensor parallelism did to a model's parameters: which are split over
-- tp (and along which dim) and which are whole on every tp rank, for the
-- gradient norm over the whole model and for gathering full weights.
local core = require("accel.core")
local clip_to_norm = require("accel.parallel.clip_to_norm")
local tp_slice = require("accel.parallel.tp_slice")

local tp_parameters = {}

-- {name, parameter, split dim or nil} for each parameter, in named_parameters order.
function tp_parameters.list(model)
  local split = {}
  for _, pair in ipairs(model:named_modules()) do
    local m = pair[2]
    if m.tp_split_dims then
      for field, dim in pairs(m:tp_split_dims()) do
        split[(pair[1] == "" and "" or pair[1] .. ".") .. field] = dim
      end
    end
  end
  local out = {}
  for name, p in model:named_parameters() do out[#out + 1] = { name, p, split[name] } end
  return out
end

-- The global L2 norm of the models' gradients: the split parameters' squares
-- summed over the tp group, the whole ones' counted once (they are equal on
-- every tp rank: their inputs' gradients were all-reduced by copy_to).
function tp_parameters.grad_norm(models, tp)
  local split_sq = core.zeros(1)
  local whole_sq = core.zeros(1)
  for _, model in ipairs(models) do
    for _, entry in ipairs(tp_parameters.list(model)) do
      local g = entry[2].grad
      if g then
        local sq = g:detach():float():pow(2):sum():view(1)
        if entry[3] then split_sq = split_sq + sq else whole_sq = whole_sq + sq end
      end
    end
  end
  split_sq = split_sq:contiguous()
  tp:all_reduce(split_sq, "sum")
  return (split_sq + whole_sq):sqrt():squeeze()  -- 0-dim, as core.clip_grad_norm returns
end

-- torch.nn.utils.clip_grad_norm_ over the global norm: every gradient scaled
-- by max_norm / (norm + 1e-6) when that is below 1. Returns the norm (a tensor).
function tp_parameters.clip_grad_norm(models, max_norm, tp)
  local params = {}
  for _, model in ipairs(models) do
    for _, p in ipairs(model:parameters()) do params[#params + 1] = p end
  end
  return clip_to_norm(params, max_norm, tp_parameters.grad_norm(models, tp))
end

-- name -> full tensor, the split ones gathered from every tp rank: the
-- state dict the unsplit model would have (every tp rank gets it).
function tp_parameters.full_state_dict(model, tp)
  local out = {}
  for name, t in pairs(model:state_dict()) do out[name] = t end
  for _, entry in ipairs(tp_parameters.list(model)) do
    if entry[3] then out[entry[1]] = tp_slice.gather(entry[2], entry[3], tp) end
  end
  return out
end

return tp_parameters
