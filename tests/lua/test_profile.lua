-- nproc: 2
-- Accelerator:profile: a Chrome trace per rank from LibTorch's profiler,
-- holding the operators fn ran; a schedule records only its active steps.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local nn = accel.nn

local acc = accel.Accelerator{ cpu = true }
local rank = acc.process_index
local folder = os.tmpname()
os.remove(folder)
folder = folder .. "_profile"

local read = dofile(arg[0]:match("(.*/)") .. "helpers/read_file.lua")

local function count(text, pattern)
  local n = 0
  for _ in text:gmatch(pattern) do n = n + 1 end
  return n
end

-- A shape in a trace recorded with record_shapes, as [16, 8].
local function has_shape(text, ...)
  return text:find("%[%s*" .. table.concat({ ... }, "%s*,%s*") .. "%s*%]") ~= nil
end

accel.set_seed(1)
local model = acc:prepare(nn.Linear(8, 4))
local x = accel.randn(16, 8)

-- The whole of fn, without a schedule.
local paths = acc:profile(function()
  for _ = 1, 3 do
    local loss = model(x):pow(2):mean()
    acc:backward(loss)
  end
end, { output = folder, record_shapes = true })
check.equal(#paths, 1, "one trace without a schedule")
check.equal(paths[1], string.format("%s/profile_%d.json", folder, rank), "Accelerate's file name, per rank")
local text = read(paths[1])
check.truthy(text:find('"traceEvents"', 1, true), "a Chrome trace")
-- CPU float32 linears are accel::linear, their products onednn::sgemm
-- (engine/nn/linear.h) where the engine is built with oneDNN, LibTorch's
-- addmm and mm elsewhere.
local onednn = count(text, '"accel::linear"') > 0
check.equal(count(text, onednn and '"accel::linear"' or '"aten::addmm"'), 3, "each forward's linear is in the trace")
check.truthy(count(text, onednn and '"onednn::sgemm"' or '"aten::mm"') >= (onednn and 6 or 3),
             "and the products, backward's included")
check.truthy(has_shape(text, 16, 8), "the input shapes are recorded")

-- A schedule: skip 1, then cycles of wait 1, warm-up 1, active 2, twice.
-- Step n makes a tensor of 7000 + n elements, so each trace names its steps.
local scheduled = acc:profile(function(prof)
  for n = 1, 12 do
    accel.zeros(7000 + n):add_(1)
    prof:step()
  end
end, { output = folder, record_shapes = true,
       schedule = { skip_first = 1, wait = 1, warmup = 1, active = 2, ["repeat"] = 2 } })
check.equal(#scheduled, 2, "one trace per cycle")
check.equal(scheduled[2], string.format("%s/profile_%d_2.json", folder, rank), "the second cycle's name")
local first, second = read(scheduled[1]), read(scheduled[2])
for n = 1, 12 do
  check.equal(has_shape(first, 7000 + n), n == 4 or n == 5, "cycle 1 records steps 4 and 5 only: step " .. n)
  check.equal(has_shape(second, 7000 + n), n == 8 or n == 9, "cycle 2 records steps 8 and 9 only: step " .. n)
end

-- An error in fn stops the profiler and is raised again; the next profile works.
check.raises(function()
  acc:profile(function() error("boom in the profiled step") end, { output = folder })
end, "an error in fn", "boom in the profiled step")
check.equal(#acc:profile(function() accel.ones(3):sum() end, { output = folder }), 1, "profiling again after an error")

check.raises(function() acc:profile(function() end, { activities = { "tpu" } }) end, "an unknown activity",
             "unknown activity 'tpu'")
check.raises(function() acc:profile(function() end, { schedule = { active = 0 } }) end, "no active step",
             "schedule.active must be a positive integer")
check.raises(function() acc:profile(function() end, { outptu = "x" }) end, "a misspelt option",
             "unknown option 'outptu'")
if not accel.cuda.is_available() then
  check.raises(function() acc:profile(function() end, { activities = { "cuda" } }) end, "cuda without a GPU",
               "no GPU here")
end
os.execute("rm -rf '" .. folder .. "'")
check.done("test_profile")
