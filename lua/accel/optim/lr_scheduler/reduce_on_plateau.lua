-- reduce_on_plateau(opt, {mode = "min", factor = 0.1, patience = 10,
--   threshold = 1e-4, threshold_mode = "rel", cooldown = 0, min_lr = 0,
--   eps = 1e-8}), stepped with the metric: sched:step(val_loss).
-- PyTorch's ReduceLROnPlateau: after more than `patience` steps without an
-- improvement beyond the threshold, the lr is multiplied by factor (not
-- below min_lr, and not when the change would be smaller than eps), then
-- `cooldown` steps pass before counting again.
local args = require("accel.util.args")
local base = require("accel.optim.lr_scheduler.base")

local ReduceLROnPlateau = base.class("reduce_on_plateau")
ReduceLROnPlateau.state_keys = base.state_keys("mode", "factor", "patience", "threshold", "threshold_mode",
                                               "cooldown", "min_lrs", "eps", "cooldown_counter", "num_bad_epochs")

function ReduceLROnPlateau:is_better(a)
  if self.best == nil then return true end
  local best = self.best
  if self.mode == "min" then
    if self.threshold_mode == "rel" then return a < best * (1 - self.threshold) end
    return a < best - self.threshold
  end
  if self.threshold_mode == "rel" then return a > best * (1 + self.threshold) end
  return a > best + self.threshold
end

-- The first step (at construction) has no metric and leaves the lr alone.
function ReduceLROnPlateau:step(metric)
  if self.last_epoch < 0 then
    self.last_epoch = 0
    for g = 1, self.num_groups do self.last_lr[g] = self:current_lr(g) end
    return
  end
  if type(metric) == "userdata" then metric = metric:item() end
  if type(metric) ~= "number" then
    args.error(self.name .. ":step: expected the metric (a number or a one-element tensor), got " ..
               tostring(metric))
  end
  self.last_epoch = self.last_epoch + 1
  if self:is_better(metric) then
    self.best = metric
    self.num_bad_epochs = 0
  else
    self.num_bad_epochs = self.num_bad_epochs + 1
  end
  if self.cooldown_counter > 0 then
    self.cooldown_counter = self.cooldown_counter - 1
    self.num_bad_epochs = 0
  end
  if self.num_bad_epochs > self.patience then
    for g = 1, self.num_groups do
      local old = self:current_lr(g)
      local new = math.max(old * self.factor, self.min_lrs[g])
      if old - new > self.eps then self.optimizer:set_option("lr", new, g) end
    end
    self.cooldown_counter = self.cooldown
    self.num_bad_epochs = 0
  end
  for g = 1, self.num_groups do self.last_lr[g] = self:current_lr(g) end
end

-- The best metric so far is left out until there is one, so the state
-- holds no infinities.
function ReduceLROnPlateau:state_dict()
  local out = base.Scheduler.state_dict(self)
  out.best = self.best
  return out
end

function ReduceLROnPlateau:load_state_dict(state)
  base.Scheduler.load_state_dict(self, state)
  self.best = state.best
end

local defaults = { mode = "min", factor = 0.1, patience = 10, threshold = 1e-4, threshold_mode = "rel",
                   cooldown = 0, min_lr = 0, eps = 1e-8 }

return function(opt, options)
  return base.attach(ReduceLROnPlateau, opt, function(self)
    local o = args.options(self.name, options, defaults)
    if o.mode ~= "min" and o.mode ~= "max" then
      args.error(self.name .. ": mode must be 'min' or 'max', got " .. tostring(o.mode))
    end
    if o.threshold_mode ~= "rel" and o.threshold_mode ~= "abs" then
      args.error(self.name .. ": threshold_mode must be 'rel' or 'abs', got " .. tostring(o.threshold_mode))
    end
    if type(o.factor) ~= "number" or o.factor >= 1 or o.factor < 0 then
      args.error(self.name .. ": factor must be a number in [0, 1), got " .. tostring(o.factor))
    end
    if type(o.patience) ~= "number" or o.patience < 0 then
      args.error(self.name .. ": patience must be a number >= 0, got " .. tostring(o.patience))
    end
    for _, key in ipairs({ "mode", "factor", "patience", "threshold", "threshold_mode", "cooldown", "eps" }) do
      self[key] = o[key]
    end
    self.min_lrs = base.per_group(self, "min_lr", o.min_lr)
    self.cooldown_counter, self.num_bad_epochs = 0, 0
  end)
end
