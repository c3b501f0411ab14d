-- linear(opt, {total, warmup = 0, start_factor = 0, end_factor = 0}): the lr
-- goes linearly from start_factor x base to the base lr over `warmup` steps,
-- then linearly to end_factor x base at step `total`, and stays there.
-- With warmup = 0 this is PyTorch's LinearLR(start_factor = 1, end_factor,
-- total_iters = total); with total = warmup and end_factor = 1, LinearLR's
-- warmup (start_factor, 1, warmup); the defaults give Hugging Face's linear
-- schedule with warmup.
local args = require("accel.util.args")
local base = require("accel.optim.lr_scheduler.base")

local LinearLR = base.class("linear")
LinearLR.state_keys = base.state_keys("total", "warmup", "start_factor", "end_factor")

function LinearLR:factor(s)
  if s < self.warmup then
    return self.start_factor + (1 - self.start_factor) * s / self.warmup
  end
  if self.total == self.warmup then return self.end_factor end
  local progress = math.min(1, (s - self.warmup) / (self.total - self.warmup))
  return 1 + (self.end_factor - 1) * progress
end

function LinearLR:get_lr()
  local f, out = self:factor(self.last_epoch), {}
  for g = 1, self.num_groups do out[g] = self.base_lrs[g] * f end
  return out
end

return function(opt, options)
  return base.attach(LinearLR, opt, function(self)
    local o = args.options(self.name, options, { total = args.NONE, warmup = 0, start_factor = 0, end_factor = 0 })
    self.total = args.positive_integer(self.name, "total", o.total)
    if type(o.warmup) ~= "number" or o.warmup < 0 or o.warmup % 1 ~= 0 or o.warmup > o.total then
      args.error(string.format("%s: warmup must be an integer from 0 to total (%d), got %s", self.name, o.total,
                               tostring(o.warmup)))
    end
    for _, key in ipairs({ "start_factor", "end_factor" }) do
      if type(o[key]) ~= "number" or o[key] < 0 then
        args.error(string.format("%s: %s must be a number >= 0, got %s", self.name, key, tostring(o[key])))
      end
    end
    self.warmup, self.start_factor, self.end_factor = o.warmup, o.start_factor, o.end_factor
  end)
end
