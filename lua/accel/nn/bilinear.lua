-- y = x1^T A x2 + b for each output feature; weight (out, in1, in2) and
-- bias U(-1/sqrt(in1), 1/sqrt(in1)), as PyTorch:
--   nn.Bilinear(in1_features, in2_features, out_features [, {bias = true}])
-- (the bias flag may also be given alone: nn.Bilinear(2, 3, 4, false)).
local core = require("accel.core")
local Module = require("accel.nn.module")
local args = require("accel.util.args")
local init = require("accel.nn.initialization")

local Bilinear = Module:extend("Bilinear")

function Bilinear:init(in1_features, in2_features, out_features, bias)
  args.positive_integer("nn.Bilinear", "in1_features", in1_features)
  args.positive_integer("nn.Bilinear", "in2_features", in2_features)
  args.positive_integer("nn.Bilinear", "out_features", out_features)
  bias = args.bias_option("nn.Bilinear", bias)
  self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
  local bound = 1 / math.sqrt(in1_features)
  self.weight = init.uniform_(core.empty(out_features, in1_features, in2_features), -bound, bound):requires_grad_()
  if bias then
    self.bias = init.uniform_(core.empty(out_features), -bound, bound):requires_grad_()
  end
end

function Bilinear:forward(x1, x2)
  return core.functional.bilinear(x1, x2, self.weight, self.bias)
end

function Bilinear:__tostring()
  return string.format("Bilinear(%d, %d -> %d%s)", self.in1_features, self.in2_features, self.out_features,
                       self.bias and "" or ", no bias")
end

return Bilinear
