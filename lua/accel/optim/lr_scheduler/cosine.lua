-- cosine(opt, {total, warmup = 0, min_lr = 0}): the lr rises linearly from 0
-- to the base lr over `warmup` steps, then follows half a cosine down to
-- min_lr at step `total`, and stays there. Without warmup this is PyTorch's
-- CosineAnnealingLR with T_max = total and eta_min = min_lr; with it,
-- Hugging Face's cosine schedule with warmup. min_lr may be a table, one
-- per param group.
local args = require("accel.util.args")
local base = require("accel.optim.lr_scheduler.base")

local CosineLR = base.class("cosine")
CosineLR.state_keys = base.state_keys("total", "warmup", "min_lrs")

function CosineLR:get_lr()
  local s, out = self.last_epoch, {}
  for g = 1, self.num_groups do
    local base_lr, min_lr = self.base_lrs[g], self.min_lrs[g]
    if s < self.warmup then
      out[g] = base_lr * s / self.warmup
    else
      local progress = math.min(1, (s - self.warmup) / math.max(1, self.total - self.warmup))
      out[g] = min_lr + (base_lr - min_lr) * 0.5 * (1 + math.cos(math.pi * progress))
    end
  end
  return out
end

return function(opt, options)
  return base.attach(CosineLR, opt, function(self)
    local o = args.options(self.name, options, { total = args.NONE, warmup = 0, min_lr = 0 })
    self.total = args.positive_integer(self.name, "total", o.total)
    if type(o.warmup) ~= "number" or o.warmup < 0 or o.warmup % 1 ~= 0 or o.warmup > o.total then
      args.error(string.format("%s: warmup must be an integer from 0 to total (%d), got %s", self.name, o.total,
                               tostring(o.warmup)))
    end
    self.warmup = o.warmup
    self.min_lrs = base.per_group(self, "min_lr", o.min_lr)
  end)
end
