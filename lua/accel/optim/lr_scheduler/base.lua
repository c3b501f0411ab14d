-- What every learning-rate schedule shares. A schedule talks to its
-- optimizer only through option("lr", group), set_option("lr", v, group) and
-- num_param_groups(), so it works on the engine's optimizers and on Lua
-- tables that wrap them. As in PyTorch, making a schedule performs its step
-- 0 (the lr becomes the schedule's first value), and each step() advances
-- one step.
local args = require("accel.util.args")

local base = {}

-- The lr each group had when the first schedule was attached to the
-- optimizer (PyTorch's group['initial_lr']), so schedules stacked on one
-- optimizer share their base lrs.
local initial_lrs = setmetatable({}, { __mode = "k" })

local function check_optimizer(where, opt)
  local kind = type(opt)
  if (kind ~= "userdata" and kind ~= "table") or type(opt.option) ~= "function" or
      type(opt.set_option) ~= "function" or type(opt.num_param_groups) ~= "function" then
    args.error(where .. ": expected an optimizer (with option, set_option and num_param_groups), got a " .. kind)
  end
end

-- A subclass: `Class.new(opt, options)` builds, `init` reads options.
function base.class(name)
  local cls = { name = "optim.lr_scheduler." .. name }
  cls.__index = cls
  return setmetatable(cls, { __index = base.Scheduler })
end

base.Scheduler = {}
local Scheduler = base.Scheduler

-- Attaches a schedule of class `cls` to opt; `setup(self)` reads the
-- schedule's options before the first step.
function base.attach(cls, opt, setup)
  check_optimizer(cls.name, opt)
  local self = setmetatable({ optimizer = opt, last_epoch = -1, last_lr = {} }, cls)
  self.num_groups = opt:num_param_groups()
  local known = initial_lrs[opt]
  if not known then
    known = {}
    for g = 1, self.num_groups do known[g] = opt:option("lr", g) end
    initial_lrs[opt] = known
  end
  self.base_lrs = {}
  for g = 1, self.num_groups do self.base_lrs[g] = known[g] end
  if setup then setup(self) end
  self:step()
  return self
end

-- Records base lrs a schedule defines itself (one-cycle's max_lr / div_factor).
function base.set_initial_lrs(self, lrs)
  initial_lrs[self.optimizer] = lrs
  for g = 1, self.num_groups do self.base_lrs[g] = lrs[g] end
end

-- A number for every group from a number or a table of one per group.
function base.per_group(self, name, value)
  if type(value) == "number" then
    local out = {}
    for g = 1, self.num_groups do out[g] = value end
    return out
  end
  if type(value) ~= "table" or #value ~= self.num_groups then
    args.error(string.format("%s: %s must be a number or a table of %d numbers (one per param group), got %s",
                             self.name, name, self.num_groups, tostring(value)))
  end
  return value
end

function Scheduler:current_lr(group)
  return self.optimizer:option("lr", group)
end

function Scheduler:step()
  self.last_epoch = self.last_epoch + 1
  local lrs = self:get_lr()
  for g = 1, self.num_groups do self.optimizer:set_option("lr", lrs[g], g) end
  for g = 1, self.num_groups do self.last_lr[g] = self.optimizer:option("lr", g) end
end

-- The lr of each group (a list, group 1 first) as of the last step.
function Scheduler:get_last_lr()
  local out = {}
  for g, lr in ipairs(self.last_lr) do out[g] = lr end
  return out
end

local function copy(v)
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = copy(x) end
  return out
end

-- Plain Lua values (numbers, strings, booleans and tables of them): the
-- step count, base lrs, last lrs and the schedule's own settings.
function Scheduler:state_dict()
  local out = {}
  for _, key in ipairs(self.state_keys) do out[key] = copy(self[key]) end
  return out
end

function Scheduler:load_state_dict(state)
  if type(state) ~= "table" then
    args.error(self.name .. ":load_state_dict: expected a table, got a " .. type(state))
  end
  local missing = {}
  for _, key in ipairs(self.state_keys) do
    if state[key] == nil then missing[#missing + 1] = key end
  end
  if #missing > 0 then
    args.error(self.name .. ":load_state_dict: missing keys: " .. table.concat(missing, ", "))
  end
  for _, key in ipairs(self.state_keys) do self[key] = copy(state[key]) end
end

base.common_state = { "last_epoch", "base_lrs", "last_lr" }

-- The common state keys plus a schedule's own.
function base.state_keys(...)
  local keys = {}
  for _, k in ipairs(base.common_state) do keys[#keys + 1] = k end
  for _, k in ipairs({ ... }) do keys[#keys + 1] = k end
  return keys
end

return base
