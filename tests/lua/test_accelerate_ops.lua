-- nproc: 2 3
-- Port of Accelerate's test_utils/scripts/test_ops.py: gather,
-- gather_object, broadcast, pad_across_processes, reduce and the --debug
-- checks of mismatched collectives. Run at 2 and 3 ranks (tests/CMakeLists.txt); the
-- reduce checks, which the original runs on 2 processes only, hold for any.
local dir = arg[0]:match("(.*/)")
local check = dofile(dir .. "helpers/check.lua")
local training = dofile(dir .. "helpers/accelerate_training.lua")
local sections = dofile(dir .. "helpers/accelerate_sections.lua")(check, "test_accelerate_ops")
local state = accel.Accelerator{}
local W, rank = state.num_processes, state.process_index

local function create_tensor()
  return accel.arange(W):float() + 1.0 + W * rank
end
local function range(first, last)
  local out = {}
  for i = first, last do out[#out + 1] = i end
  return out
end

sections.run("partial_state", function()
  local partial = accel.PartialState()
  check.equal(partial.num_processes, W, "PartialState().num_processes")
  check.equal(partial.process_index, rank, "PartialState().process_index")
  check.near(partial:gather(create_tensor()), range(1, W * W), 0, "PartialState():gather")
end)

sections.run("gather", function()
  check.near(state:gather(create_tensor()), range(1, W * W), 0, "gather")
end)

-- Accelerate's gather_object flattens one level of lists; accel returns
-- each rank's value as it was given (docs/coming-from-accelerate.md).
sections.run("gather_object", function()
  local gathered = state:gather_object({ rank })
  check.equal(#gathered, W, "one value per rank")
  for r = 1, W do check.equal(gathered[r][1], r - 1, "rank " .. (r - 1) .. "'s value") end
end)

sections.run("gather_non_contiguous", function()
  local t = accel.arange(12, { dtype = accel.int64 }):view(4, 3):t()
  check.equal(t:is_contiguous(), false, "a transposed view is not contiguous")
  check.equal(state:gather(t):size(1), 3 * W, "gathered rows")
end)

sections.run("broadcast", function()
  local b = state:broadcast(create_tensor())
  check.equal(b:size(1), W, "shape")
  check.near(b, range(1, W), 0, "rank 0's values")
end)

sections.run("pad_across_processes", function()
  local t = state.is_main_process and accel.arange(W + 1) or accel.arange(W)
  local padded = state:pad_across_processes(t)
  check.equal(padded:size(1), W + 1, "padded size")
  if not state.is_main_process then
    local want = range(0, W - 1)
    want[#want + 1] = 0
    check.near(padded, want, 0, "padded with zeros at the end")
  end
end)

-- Element j of create_tensor() is j + W*r on rank r (1-based j).
local function over_ranks(fn)
  local out = {}
  for j = 1, W do
    local values = {}
    for r = 0, W - 1 do values[#values + 1] = j + W * r end
    out[j] = fn(values)
  end
  return out
end
local function sum(v) local s = 0 for _, x in ipairs(v) do s = s + x end return s end

sections.run("reduce_sum", function()
  check.near(state:reduce(create_tensor(), "sum"), over_ranks(sum), 1e-6, "reduce sum")
end)
sections.run("reduce_mean", function()
  check.near(state:reduce(create_tensor(), "mean"), over_ranks(function(v) return sum(v) / W end), 1e-6,
             "reduce mean")
end)
sections.run("reduce_max", function()
  check.near(state:reduce(create_tensor(), "max"), over_ranks(function(v) return math.max(unpack(v)) end),
             1e-6, "reduce max")
end)

-- Accelerate switches state.debug on at run time; accel's checks are the
-- launcher's --debug, so this section needs `accel-run --debug`.
sections.run("op_checker", function()
  local function mismatched(first_shape, other)
    return { tensor = rank == 0 and accel.zeros(unpack(first_shape)) or accel.zeros(unpack(other)) }
  end
  check.raises(function() state:pad_across_processes(mismatched({ 1, 5 }, { 1, 1, 6 }), { dim = 1 }) end,
               "pad_across_processes of tensors with different dims", "rank")
  check.raises(function() state:reduce(mismatched({ 1, 5 }, { 1, 2, 5 }), "sum") end,
               "reduce of different shapes", "rank")
  check.raises(function() state:broadcast(mismatched({ 1, 5 }, { 1, 2, 5 })) end,
               "broadcast of different shapes", "rank")
end, { unless = os.getenv("ACCEL_DEBUG") ~= "1" and "needs accel-run --debug" or nil })

sections.run("are_the_same_tensors", function()
  check.truthy(training.are_the_same_tensors(state, state:broadcast(create_tensor())), "broadcast agrees")
  check.truthy(W == 1 or not training.are_the_same_tensors(state, create_tensor()), "ranks' tensors differ")
end)

sections.finish()
