-- A row-parallel linear (Megatron-LM's RowParallelLinear): this rank holds
-- the columns [r * in/tp, (r+1) * in/tp) of the weight and takes that slice
-- of the input (the split output of a ColwiseLinear), so its product is a
-- partial sum of the output, which the tp group's reduce_from adds up
-- (all-reduce forward, identity backward, Megatron's g). The bias is whole
-- on every rank and added once, after the sum.
local core = require("accel.core")
local Module = require("accel.nn.module")
local shard = require("accel.parallel.shard")

local RowwiseLinear = Module:extend("RowwiseLinear")

function RowwiseLinear:init(linear, tp, name)
  self.weight = shard.slice(linear.weight, 2, tp, name .. ".weight")
  if linear.bias then self.bias = linear.bias:detach():clone():requires_grad_(linear.bias.requires_grad) end
  self.in_features, self.out_features = self.weight:size(2), linear.weight:size(1)
  rawset(self, "tp", tp)
end

function RowwiseLinear:forward(x)
  local y = self.tp.group:reduce_from(core.functional.linear(x, self.weight))
  if self.bias then y = y + self.bias end
  return y
end

function RowwiseLinear:tp_split_dims()
  return { weight = 2 }
end

function RowwiseLinear:__tostring()
  return string.format("RowwiseLinear(%d of %d -> %d, tp rank %d)", self.in_features,
                       self.in_features * self.tp.size, self.out_features, self.tp.rank)
end

return RowwiseLinear
