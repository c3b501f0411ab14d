-- A column-parallel linear (Megatron-LM's ColumnParallelLinear): this rank
-- holds the rows [r * out/tp, (r+1) * out/tp) of the weight (and bias), so
-- it computes that slice of the outputs from the whole input. The input
-- goes through the tp group's copy_to (identity forward, all-reduce of the
-- input's gradient backward, Megatron's f). With gather_output the slices
-- are joined on the last dim (transformers' "colwise_rep"); without, the
-- output stays split (heads of attention, the MLP's hidden units, or the
-- vocabulary before accel.parallel.vocab_parallel_cross_entropy).
-- weight, bias and out_features are this rank's: a module reading its
-- output width off them (LlamaAttention's local heads) sees its share.
-- Under sequence parallelism (sequence_parallel.lua) the input arrives split
-- over the sequence: input = "sequence" gathers it here (all-gather forward,
-- reduce-scatter of the input's gradient backward, in place of copy_to);
-- input = "gathered" takes it as a gather_sequence module around this one
-- gathered it (that gather's backward sums the gradient).
local core = require("accel.core")
local Module = require("accel.nn.module")
local tp_slice = require("accel.parallel.tp_slice")
local sequence_parallel = require("accel.parallel.sequence_parallel")

local ColwiseLinear = Module:extend("ColwiseLinear")

-- linear: an nn.Linear (or anything with weight (out, in) and bias); tp:
-- the mesh dim it splits over; name: its module name, for errors.
-- input: "replicated" (the default), "sequence" or "gathered".
-- sp: the model's sequence-parallel state (sequence_parallel.lua) for the
-- inputs "sequence" and "gathered": a forward that does not split the
-- sequence gives this layer the whole sequence, replicated.
function ColwiseLinear:init(linear, tp, name, gather_output, input, sp)
  self.weight = tp_slice.slice(linear.weight, 1, tp, name .. ".weight")
  if linear.bias then self.bias = tp_slice.slice(linear.bias, 1, tp, name .. ".bias") end
  self.in_features, self.out_features = linear.weight:size(2), self.weight:size(1)
  rawset(self, "tp", tp)
  rawset(self, "gather_output", gather_output or false)
  rawset(self, "input", input or "replicated")
  rawset(self, "sp", sp)
end

-- The input as this rank's slice of the outputs is computed from: the whole
-- of it, through the operator whose backward sums the ranks' gradients (the
-- chunked loss of a vocabulary-parallel lm_head takes it from here too).
function ColwiseLinear:region_input(x)
  local group = self.tp.group
  local split = self.input ~= "replicated" and self.sp.split
  if split and self.input == "sequence" then return group:gather_sequence(x, sequence_parallel.DIM) end
  if not split then return group:copy_to(x) end
  return x
end

function ColwiseLinear:forward(x)
  local y = core.functional.linear(self:region_input(x), self.weight, self.bias)
  if self.gather_output then return self.tp.group:gather_from(y) end
  return y
end

-- Which of its parameters are split over tp (the rest are replicated), and
-- along which dim: for gradient norms and for gathering full weights.
function ColwiseLinear:tp_split_dims()
  return { weight = 1, bias = 1 }
end

function ColwiseLinear:__tostring()
  return string.format("ColwiseLinear(%d -> %d of %d, tp rank %d%s%s)", self.in_features, self.out_features,
                       self.out_features * self.tp.size, self.tp.rank, self.gather_output and ", gathered" or "",
                       self.input == "replicated" and "" or ", input " .. self.input)
end

return ColwiseLinear
