-- opt.param_groups, as PyTorch's: a list of tables, one per group, whose
-- params and options (lr, weight_decay, betas' parts as the engine names
-- them, ...) read and write the optimizer's own, so that
-- `opt.param_groups[1].lr = 1e-4` is what PyTorch's and Accelerate's users
-- write (groups are 1-based, as every list here). set_option and option stay.
--   param_groups.install(opt)   gives every engine optimizer the field
local param_groups = {}

local function group(opt, g)
  return setmetatable({}, {
    __index = function(_, key)
      if key == "params" then return opt:params(g) end
      return opt:option(key, g)
    end,
    __newindex = function(_, key, value)
      if key == "params" then
        error("param_groups[" .. g .. "].params cannot be replaced: make a new optimizer for new parameters", 2)
      end
      opt:set_option(key, value, g)
    end,
  })
end

local function groups_of(opt)
  local out = {}
  for g = 1, opt:num_param_groups() do out[g] = group(opt, g) end
  return out
end

-- The optimizers share one metatable: its methods table becomes the
-- fallback of a lookup that answers param_groups first.
function param_groups.install(opt)
  local mt = getmetatable(opt)
  if type(mt.__index) ~= "table" then return end
  local methods = mt.__index
  mt.__index = function(self, key)
    if key == "param_groups" then return groups_of(self) end
    return methods[key]
  end
end

return param_groups
