-- Sequence parallelism (Megatron-LM's), the plan kinds that act on modules
-- outside the tensor-parallel linears. Between the tensor-parallel regions
-- the activations (batch, sequence, ...) are split over the sequence, dim 2,
-- across the tp group: rank r holds positions [r * T/tp, (r+1) * T/tp).
--   sequence_parallel  a norm or dropout runs on this rank's positions only.
--                      Its parameters stay whole on every rank, but each
--                      rank's gradient covers its positions only: the
--                      parameters enter the forward through the tp group's
--                      copy_to, whose backward sums the gradient over the
--                      group (Megatron all-reduces these "sequence_parallel"
--                      gradients after backward; here autograd does it, so
--                      every tp rank holds the whole gradient and the global
--                      norm counts it once, as a whole parameter). A Dropout
--                      draws the mask of the whole sequence, as one process
--                      would, and applies this rank's part of it.
--   gather_sequence    a module (attention, MLP) whose first input is
--                      all-gathered over the sequence (torchtitan's
--                      PrepareModuleInput from Shard(1) to Replicate). Its
--                      ColwiseLinears then take the gathered input as it is:
--                      the gather's backward reduce-scatter sums their
--                      partial gradients, which copy_to would otherwise do.
-- Both keep the module (and its parameters' names) and wrap its forward.
--
-- Only a forward that records gradients splits the sequence (what SP saves
-- is the activations kept for backward), and its length must divide by
-- tp_size. Without gradients (a no_grad evaluation, generate) the forward
-- runs as tensor parallelism alone, any length: every rank holds the whole
-- sequence, the row-parallel outputs are all-reduced and nothing is
-- gathered, so generate's one-token steps and its last-position logits
-- work. The model's sequence-parallel modules share one state, `sp`
-- ({split = true | false}, made by tensor_parallel), set per forward by the vocabulary-parallel
-- embedding that starts the split (vocab_embedding_sequence) and read by
-- the others.
local core = require("accel.core")
local args = require("accel.util.args")
local Module = require("accel.nn.module")
local Dropout = require("accel.nn.dropout").Dropout

local sequence_parallel = {}

-- The sequence dim of the split activations (batch, sequence, ...).
sequence_parallel.DIM = 2

-- A model's shared state (above): split until a forward says otherwise.
function sequence_parallel.new_split_flag()
  return { split = true }
end

-- Whether this forward splits a sequence of `length` (above): with
-- gradients it does, refusing a length that does not divide by tp_size.
function sequence_parallel.splits(length, tp, name)
  if not core.is_grad_enabled() then return false end
  sequence_parallel.check_length(length, tp, name)
  return true
end

-- Refuses a sequence the tp group cannot split evenly, naming the lengths.
function sequence_parallel.check_length(length, tp, name)
  if length % tp.size ~= 0 then
    args.error(string.format("accel.parallel.tensor_parallel: sequence parallelism splits the sequence over tp_size "
                             .. "%d, but %s got a sequence of length %d, which does not divide by %d", tp.size, name,
                             length, tp.size))
  end
end

-- Calls `forward` (module, ...) around the module's forward and any wrapper set before.
local function wrap_forward(m, forward)
  local inner = Module.forward_wrapper(m)
  local function call(self, ...)
    if inner then return inner(self, ...) end
    return self:forward(...)
  end
  Module.set_forward_wrapper(m, function(self, ...) return forward(call, self, ...) end)
end

-- The mask of the whole sequence (drawn as F.dropout of an input that size
-- draws it), narrowed to this rank's positions.
local function dropout_on_part(call, self, tp, x)
  if not self.training or self.p == 0 then return call(self, x) end
  local full = x:size()
  local T = full[sequence_parallel.DIM]
  full[sequence_parallel.DIM] = T * tp.size
  local mask = core.functional.dropout(core.ones(full, { dtype = x.dtype, device = x.device }), self.p, true)
  return x * mask:narrow(sequence_parallel.DIM, tp.rank * T + 1, T)
end

local function packed(...)
  return { n = select("#", ...), ... }
end

-- The module's own parameters, each swapped for its copy_to while the
-- forward runs (so its gradient is summed over the group), then put back.
local function with_summed_gradients(call, self, tp, names, ...)
  local params = {}
  for i, key in ipairs(names) do
    params[i] = rawget(self, key)
    rawset(self, key, tp.group:copy_to(params[i]))
  end
  local result = packed(pcall(call, self, ...))
  for i, key in ipairs(names) do rawset(self, key, params[i]) end
  if not result[1] then error(result[2], 0) end
  return unpack(result, 2, result.n)
end

-- The `sequence_parallel` kind: returns the module, its forward wrapped
-- (a plain forward when this forward does not split the sequence).
function sequence_parallel.norm(m, tp, _, sp)
  if getmetatable(m) == Dropout then
    wrap_forward(m, function(call, self, x)
      if not sp.split then return call(self, x) end
      return dropout_on_part(call, self, tp, x)
    end)
  else
    local names = {}
    for name in m:named_parameters() do
      if not name:find(".", 1, true) then names[#names + 1] = name end
    end
    wrap_forward(m, function(call, self, ...)
      if not sp.split then return call(self, ...) end
      return with_summed_gradients(call, self, tp, names, ...)
    end)
  end
  rawset(m, "sequence_parallel", true)
  return m
end

-- The `gather_sequence` kind: returns the module, its first input gathered
-- (when this forward splits the sequence).
function sequence_parallel.gather_input(m, tp, _, sp)
  wrap_forward(m, function(call, self, x, ...)
    if not sp.split then return call(self, x, ...) end
    return call(self, tp.group:gather_sequence(x, sequence_parallel.DIM), ...)
  end)
  rawset(m, "gathers_sequence", true)
  return m
end

-- The name of the first of `model`'s modules that sequence parallelism
-- changed (a norm on part of the sequence, a module gathering it, a linear
-- or an embedding splitting it or taking it split), or nil: what a
-- pipeline, whose stages pass whole sequences, refuses.
function sequence_parallel.applied(model)
  for _, pair in ipairs(model:named_modules()) do
    local m = pair[2]
    if rawget(m, "sequence_parallel") or rawget(m, "gathers_sequence") or rawget(m, "sequence_output")
       or rawget(m, "sp") then
      return pair[1]
    end
  end
end

return sequence_parallel
