-- lambda(opt, fn): lr = base lr x fn(step), fn a Lua function of the step
-- number (0 at construction); a table of functions gives one per param group
-- (PyTorch's LambdaLR). The functions are not part of the state dict.
local args = require("accel.util.args")
local base = require("accel.optim.lr_scheduler.base")

local LambdaLR = base.class("lambda")
LambdaLR.state_keys = base.state_keys()

function LambdaLR:get_lr()
  local out = {}
  for g = 1, self.num_groups do
    local factor = self.fns[g](self.last_epoch)
    if type(factor) ~= "number" then
      args.error(string.format("%s: the function of group %d returned %s at step %d, not a number", self.name, g,
                               tostring(factor), self.last_epoch))
    end
    out[g] = self.base_lrs[g] * factor
  end
  return out
end

return function(opt, fn)
  return base.attach(LambdaLR, opt, function(self)
    local fns = fn
    if type(fn) == "function" then
      fns = {}
      for g = 1, self.num_groups do fns[g] = fn end
    end
    if type(fns) ~= "table" or #fns ~= self.num_groups then
      args.error(string.format("%s: expected a function or a table of %d functions, got %s", self.name,
                               self.num_groups, tostring(fn)))
    end
    for g = 1, self.num_groups do
      if type(fns[g]) ~= "function" then
        args.error(string.format("%s: entry %d is a %s, not a function", self.name, g, type(fns[g])))
      end
    end
    self.fns = fns
  end)
end
