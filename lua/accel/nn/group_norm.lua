-- Normalises groups of channels of an (N, C, ...) input:
--   nn.GroupNorm(num_groups, num_channels, {eps = 1e-5, affine = true})
-- weight starts at ones, bias at zeros, one per channel.
local core = require("accel.core")
local Module = require("accel.nn.module")
local args = require("accel.util.args")

local GroupNorm = Module:extend("GroupNorm")

function GroupNorm:init(num_groups, num_channels, options)
  args.positive_integer("nn.GroupNorm", "num_groups", num_groups)
  args.positive_integer("nn.GroupNorm", "num_channels", num_channels)
  if num_channels % num_groups ~= 0 then
    args.error(string.format("nn.GroupNorm: num_channels %d is not divisible by num_groups %d", num_channels,
                             num_groups))
  end
  local o = args.options("nn.GroupNorm", options, { eps = 1e-5, affine = true }, { eps = "number", affine = "boolean" })
  self.num_groups, self.num_channels, self.eps = num_groups, num_channels, o.eps
  if o.affine then
    self.weight = core.ones(num_channels, { requires_grad = true })
    self.bias = core.zeros(num_channels, { requires_grad = true })
  end
end

function GroupNorm:forward(x)
  return core.functional.group_norm(x, self.num_groups, self.weight, self.bias, { eps = self.eps })
end

function GroupNorm:__tostring()
  return string.format("GroupNorm(%d groups, %d channels)", self.num_groups, self.num_channels)
end

return GroupNorm
