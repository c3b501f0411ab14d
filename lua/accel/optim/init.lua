-- accel.optim: the engine's optimizers and the learning-rate schedules.
-- Each optimizer takes a list of parameters or of groups ({params = ...,
-- lr = ...}) and a table of options:
--   optim.AdamW(model:parameters(), {lr = 1e-3, weight_decay = 0.01})
local core = require("accel.core")

local param_groups = require("accel.optim.param_groups")

local optim = {}
for name, make in pairs(core.optim) do
  optim[name] = function(...)
    local opt = make(...)
    if type(opt) == "userdata" then param_groups.install(opt) end
    return opt
  end
end
optim.lr_scheduler = require("accel.optim.lr_scheduler")

return optim
