-- one_cycle(opt, {max_lr, total, pct_start = 0.3, anneal_strategy = "cos",
--   cycle_momentum = true, base_momentum = 0.85, max_momentum = 0.95,
--   div_factor = 25, final_div_factor = 1e4, three_phase = false})
-- PyTorch's OneCycleLR: the lr climbs from max_lr / div_factor to max_lr over
-- pct_start of `total` steps, then anneals to max_lr / div_factor /
-- final_div_factor; the momentum (beta1 for Adam-type optimizers) moves the
-- other way between max_momentum and base_momentum. Stepping past `total`
-- is an error. max_lr and the momenta may be tables, one per param group.
local args = require("accel.util.args")
local base = require("accel.optim.lr_scheduler.base")

local OneCycleLR = base.class("one_cycle")
OneCycleLR.state_keys = base.state_keys("total", "phases", "anneal_strategy", "cycle_momentum", "momentum_option",
                                        "group_values")

local anneal = {
  cos = function(start, finish, pct) return finish + (start - finish) / 2 * (math.cos(math.pi * pct) + 1) end,
  linear = function(start, finish, pct) return (finish - start) * pct + start end,
}

function OneCycleLR:get_lr()
  local s = self.last_epoch
  if s > self.total then
    args.error(string.format("%s: tried to step %d times; the schedule has total = %d steps", self.name, s + 1,
                             self.total))
  end
  local fn, out = anneal[self.anneal_strategy], {}
  for g = 1, self.num_groups do
    local values, start_step = self.group_values[g], 0
    for i, phase in ipairs(self.phases) do
      if s <= phase.end_step or i == #self.phases then
        local pct = (s - start_step) / (phase.end_step - start_step)
        out[g] = fn(values[phase.start_lr], values[phase.end_lr], pct)
        if self.cycle_momentum then
          local m = fn(values[phase.start_momentum], values[phase.end_momentum], pct)
          self.optimizer:set_option(self.momentum_option, m, g)
        end
        break
      end
      start_step = phase.end_step
    end
  end
  return out
end

local defaults = { max_lr = args.NONE, total = args.NONE, pct_start = 0.3, anneal_strategy = "cos",
                   cycle_momentum = true, base_momentum = 0.85, max_momentum = 0.95, div_factor = 25,
                   final_div_factor = 1e4, three_phase = false }

-- The optimizer's momentum option: beta1 for Adam-type ones, else momentum.
local function momentum_option(opt)
  for _, name in ipairs({ "beta1", "momentum" }) do
    if pcall(opt.option, opt, name, 1) then return name end
  end
  return nil
end

return function(opt, options)
  return base.attach(OneCycleLR, opt, function(self)
    local o = args.options(self.name, options, defaults)
    self.total = args.positive_integer(self.name, "total", o.total)
    if type(o.pct_start) ~= "number" or o.pct_start < 0 or o.pct_start > 1 then
      args.error(self.name .. ": pct_start must be a number from 0 to 1, got " .. tostring(o.pct_start))
    end
    if not anneal[o.anneal_strategy] then
      args.error(self.name .. ": anneal_strategy must be 'cos' or 'linear', got " .. tostring(o.anneal_strategy))
    end
    self.anneal_strategy = o.anneal_strategy
    local p, n = o.pct_start, self.total
    if o.three_phase then
      self.phases = {
        { end_step = p * n - 1, start_lr = "initial_lr", end_lr = "max_lr",
          start_momentum = "max_momentum", end_momentum = "base_momentum" },
        { end_step = 2 * p * n - 2, start_lr = "max_lr", end_lr = "initial_lr",
          start_momentum = "base_momentum", end_momentum = "max_momentum" },
        { end_step = n - 1, start_lr = "initial_lr", end_lr = "min_lr",
          start_momentum = "max_momentum", end_momentum = "max_momentum" },
      }
    else
      self.phases = {
        { end_step = p * n - 1, start_lr = "initial_lr", end_lr = "max_lr",
          start_momentum = "max_momentum", end_momentum = "base_momentum" },
        { end_step = n - 1, start_lr = "max_lr", end_lr = "min_lr",
          start_momentum = "base_momentum", end_momentum = "max_momentum" },
      }
    end

    local max_lrs = base.per_group(self, "max_lr", o.max_lr)
    self.group_values = {}
    local initial = {}
    for g = 1, self.num_groups do
      initial[g] = max_lrs[g] / o.div_factor
      self.group_values[g] = { initial_lr = initial[g], max_lr = max_lrs[g],
                               min_lr = initial[g] / o.final_div_factor }
    end
    base.set_initial_lrs(self, initial)

    self.cycle_momentum, self.momentum_option = o.cycle_momentum, false
    if o.cycle_momentum then
      self.momentum_option = momentum_option(opt)
      if not self.momentum_option then
        args.error(self.name .. ": cycle_momentum needs an optimizer with a momentum or beta1 option; pass " ..
                   "cycle_momentum = false")
      end
      local maxes = base.per_group(self, "max_momentum", o.max_momentum)
      local bases = base.per_group(self, "base_momentum", o.base_momentum)
      for g = 1, self.num_groups do
        self.group_values[g].max_momentum, self.group_values[g].base_momentum = maxes[g], bases[g]
        opt:set_option(self.momentum_option, maxes[g], g)
      end
    end
  end)
end
