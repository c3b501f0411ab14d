-- The name of each parameter an optimizer steps, by its index in the
-- optimizer's state ("state.<i>.<slot>", from 0), and how many each group
-- holds: what a checkpoint keyed by parameter name (expert_checkpoint.lua)
-- needs to turn the optimizer's indices into names and back. A parameter
-- is found among `models`' named parameters by identity (is_set_to; only
-- those of its shape are compared); one that is none of theirs has no name.
-- prepare records this for the optimizer it shards (parallel_dims.lua),
-- before its parameters become flat shards: the layout its full state
-- keeps. A parameter on the meta device (built empty, to take the main
-- process's weights, or outside a pipeline's stages) is found by the
-- handle alone (same_tensor.lua): LibTorch cannot compare meta storages.
local same_tensor = require("accel.util.same_tensor")

return function(optimizer, models)
  local by_shape = {}
  for _, model in ipairs(models) do
    for name, p in model:named_parameters() do
      local shape = table.concat(p:size(), "x")
      by_shape[shape] = by_shape[shape] or {}
      table.insert(by_shape[shape], { name, p })
    end
  end
  local names, group_sizes, index = {}, {}, 0
  for g = 1, optimizer:num_param_groups() do
    local params = optimizer:params(g)
    group_sizes[g] = #params
    for _, p in ipairs(params) do
      for _, candidate in ipairs(by_shape[table.concat(p:size(), "x")] or {}) do
        if same_tensor(p, candidate[2]) then
          names[index] = candidate[1]
          break
        end
      end
      index = index + 1
    end
  end
  return { names = names, group_sizes = group_sizes }
end
