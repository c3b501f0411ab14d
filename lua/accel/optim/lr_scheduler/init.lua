-- optim.lr_scheduler: learning-rate schedules written in Lua. Each is made
-- with the optimizer and its options and has step(), get_last_lr(),
-- state_dict() and load_state_dict():
--   local sched = optim.lr_scheduler.cosine(opt, { warmup = 100, total = 2000 })
--   ... opt:step(); sched:step()
return {
  step = require("accel.optim.lr_scheduler.step"),
  multistep = require("accel.optim.lr_scheduler.multistep"),
  exponential = require("accel.optim.lr_scheduler.exponential"),
  cosine = require("accel.optim.lr_scheduler.cosine"),
  linear = require("accel.optim.lr_scheduler.linear"),
  one_cycle = require("accel.optim.lr_scheduler.one_cycle"),
  reduce_on_plateau = require("accel.optim.lr_scheduler.reduce_on_plateau"),
  lambda = require("accel.optim.lr_scheduler.lambda"),
}
