-- A row-parallel linear (Megatron-LM's RowParallelLinear): this rank holds
-- the columns [r * in/tp, (r+1) * in/tp) of the weight and takes that slice
-- of the input (the split output of a ColwiseLinear), so its product is a
-- partial sum of the output, which the tp group's reduce_from adds up
-- (all-reduce forward, identity backward, Megatron's g). The bias is whole
-- on every rank and added once, after the sum. With sequence_output
-- (sequence parallelism) the partial outputs are reduce-scattered over the
-- sequence instead (each rank keeps the sum for its part of the sequence;
-- backward all-gathers the gradient), and the bias is added to that part.
local core = require("accel.core")
local Module = require("accel.nn.module")
local tp_slice = require("accel.parallel.tp_slice")
local sequence_parallel = require("accel.parallel.sequence_parallel")

local RowwiseLinear = Module:extend("RowwiseLinear")

-- sequence_output: the model's sequence-parallel state (sequence_parallel.lua)
-- when the output is split over the sequence (rowwise_sequence), else nil.
function RowwiseLinear:init(linear, tp, name, sequence_output)
  self.weight = tp_slice.slice(linear.weight, 2, tp, name .. ".weight")
  if linear.bias then self.bias = linear.bias:detach():clone():requires_grad_(linear.bias.requires_grad) end
  self.in_features, self.out_features = self.weight:size(2), linear.weight:size(1)
  rawset(self, "tp", tp)
  rawset(self, "sequence_output", sequence_output or false)
end

function RowwiseLinear:forward(x)
  local partial = core.functional.linear(x, self.weight)
  local split = self.sequence_output and self.sequence_output.split
  local y = split and self.tp.group:reduce_scatter_sequence(partial, sequence_parallel.DIM)
    or self.tp.group:reduce_from(partial)
  if self.bias then
    -- Added to this rank's part of the sequence only, the bias gets its
    -- gradient summed over the group by copy_to (as sequence_parallel norms).
    y = y + (split and self.tp.group:copy_to(self.bias) or self.bias)
  end
  return y
end

function RowwiseLinear:tp_split_dims()
  return { weight = 2 }
end

function RowwiseLinear:__tostring()
  return string.format("RowwiseLinear(%d of %d -> %d, tp rank %d%s)", self.in_features,
                       self.in_features * self.tp.size, self.out_features, self.tp.rank,
                       self.sequence_output and ", output split over the sequence" or "")
end

return RowwiseLinear
