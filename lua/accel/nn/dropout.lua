-- Dropout(p = 0.5) zeroes elements with probability p and scales the rest
-- by 1 / (1 - p) in training mode; Dropout2d zeroes whole channels. Both
-- pass the input through in eval mode. p is given alone (nn.Dropout(0.1))
-- or as an options table (nn.Dropout{p = 0.1}).
local core = require("accel.core")
local Module = require("accel.nn.module")
local args = require("accel.util.args")

local F = core.functional

local dropout = {}

local function make(name, functional)
  local cls = Module:extend(name)
  function cls:init(p)
    if type(p) == "table" then p = args.options("nn." .. name, p, { p = 0.5 }, { p = "number" }).p end
    if p == nil then p = 0.5 end
    self.p = args.probability("nn." .. name, "p", p)
  end
  function cls:forward(x)
    return functional(x, self.p, self.training)
  end
  function cls:__tostring()
    return string.format("%s(p %g)", name, self.p)
  end
  dropout[name] = cls
end

make("Dropout", F.dropout)
make("Dropout2d", F.dropout2d)

return dropout
