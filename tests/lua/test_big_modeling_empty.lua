-- nproc: 1
-- accel.init_empty_weights builds a model whose weights take no memory (the
-- process's RSS and the engine's tensor-bytes count stay flat while a 256 MiB
-- model is built), accel.compute_module_sizes reads its sizes, forward
-- refuses its meta weights by name, and to_empty gives them memory.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local nn = accel.nn

local resident_bytes = dofile(arg[0]:match("(.*/)") .. "helpers/resident_bytes.lua")

-- 16 layers of 2048x2048 floats: 16 x 16 MiB.
local function build_big()
  local layers = {}
  for i = 1, 16 do layers[i] = nn.Linear(2048, 2048) end
  return nn.Sequential(unpack(layers))
end

collectgarbage()
local rss_before, bytes_before = resident_bytes(), accel.tensor_bytes()
local big = accel.init_empty_weights(build_big)
collectgarbage()
local rss_grew, bytes_grew = resident_bytes() - rss_before, accel.tensor_bytes() - bytes_before
check.truthy(rss_grew < 16 * 2 ^ 20, string.format("RSS grew %.1f MiB building a 256 MiB model", rss_grew / 2 ^ 20))
check.equal(bytes_grew, 0, "tensor bytes made under init_empty_weights")
for name, p in big:named_parameters() do
  if p.device ~= "meta" then check.equal(p.device, "meta", name .. "'s device") end
end
check.equal(#big:parameters(), 32, "parameters of the empty model")

local sizes = accel.compute_module_sizes(big)
check.equal(sizes[""], 16 * (2048 * 2048 + 2048) * 4, "whole model's bytes")
check.equal(sizes["3"], (2048 * 2048 + 2048) * 4, "one layer's bytes")
check.equal(sizes["3.bias"], 2048 * 4, "one tensor's bytes")
check.equal(accel.compute_module_sizes(big, accel.bfloat16)[""], 16 * (2048 * 2048 + 2048) * 2, "bytes in bfloat16")

-- Creation goes back to the CPU after fn, also when fn fails.
check.equal(accel.zeros(2).device, "cpu", "a tensor made after init_empty_weights")
check.raises(function() accel.init_empty_weights(function() error("broken model") end) end,
             "an error inside fn", "broken model")
check.equal(accel.zeros(2).device, "cpu", "a tensor made after a failed init_empty_weights")
check.equal(select(2, accel.init_empty_weights(function() return 1, 2 end)), 2, "fn's results")
check.raises(function() accel.init_empty_weights(42) end, "a non-function", "init_empty_weights", "number")

-- Integer buffers count at their own size whatever the dtype asked for.
local with_buffer = accel.init_empty_weights(function()
  local m = nn.Linear(4, 3)
  m:register_buffer("steps", accel.LongTensor({ 1, 2, 3, 4, 5 }))
  return m
end)
check.equal(with_buffer.steps.device, "meta", "a buffer made under init_empty_weights")
local half = accel.compute_module_sizes(with_buffer, accel.float16)
check.equal(half[""], (12 + 3) * 2 + 5 * 8, "float16 sizes with an int64 buffer")
check.raises(function() accel.compute_module_sizes(with_buffer, accel.int32) end, "an integer dtype",
             "floating dtype", "int32")

-- Forward on meta weights is an error naming the layer and its tensors.
local small = accel.init_empty_weights(function() return nn.Sequential(nn.Linear(4, 3), nn.ReLU()) end)
check.raises(function() small(accel.randn(2, 4)) end, "forward on meta weights",
             "Linear(4 -> 3)", "weight, bias are on the meta device", "to_empty")

check.raises(function() accel.Accelerator():prepare(small) end, "preparing meta weights",
             "Accelerator:prepare: the model's 1.bias, 1.weight are on the meta device", "to_empty")

small:to_empty("cpu")
check.equal(small[1].weight.device, "cpu", "weight after to_empty")
check.equal(table.concat(small[1].weight:size(), "x"), "3x4", "weight's shape after to_empty")
check.truthy(small[1].weight.requires_grad, "weight still a parameter after to_empty")
check.equal(#small:parameters(), 2, "parameters after to_empty")
check.equal(table.concat(small(accel.randn(2, 4)):size(), "x"), "2x3", "forward after to_empty")

check.done("test_big_modeling_empty")
