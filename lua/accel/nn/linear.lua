-- y = x W^T + b, initialised as PyTorch does: U(-1/sqrt(in), 1/sqrt(in)).
--   nn.Linear(in_features, out_features [, {bias = true}])
-- The bias flag may also be given alone, as PyTorch's positional argument:
-- nn.Linear(3, 2, false).
local core = require("accel.core")
local Module = require("accel.nn.module")
local args = require("accel.util.args")

local Linear = Module:extend("Linear")

function Linear:init(in_features, out_features, bias)
  args.positive_integer("nn.Linear", "in_features", in_features)
  args.positive_integer("nn.Linear", "out_features", out_features)
  bias = args.bias_option("nn.Linear", bias)
  self.in_features, self.out_features = in_features, out_features
  local bound = 1 / math.sqrt(in_features)
  -- In place: a model of many layers would otherwise hold up to the
  -- collector's pause of dead temporaries on top of its weights while built.
  self.weight = core.rand(out_features, in_features):mul_(2 * bound):sub_(bound):requires_grad_()
  if bias then
    self.bias = core.rand(out_features):mul_(2 * bound):sub_(bound):requires_grad_()
  end
end

function Linear:forward(x)
  return core.functional.linear(x, self.weight, self.bias)
end

function Linear:__tostring()
  return string.format("Linear(%d -> %d%s)", self.in_features, self.out_features,
                       self.bias and "" or ", no bias")
end

return Linear
