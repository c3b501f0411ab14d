-- The pipeline's schedules (accel.parallel.pipeline.stage_runtime) at PP 4:
-- each schedule's measured bubble against the papers' (p - 1) / m (GPipe,
-- 1F1B) and (p - 1) / (v m) (Interleaved1F1B), and the activations each rank
-- holds at its peak against what its list of actions holds at most.
--   accel-run bench/parallel/pipeline_schedules.lua --nproc 4 --threads 1 -- \
--     [forward_ms=20] [steps=3] [width=262144]
-- The model is 8 layers; each layer's forward sleeps forward_ms
-- (accel.core.live.sleep) and multiplies its input by a weight of `width`
-- values, so a stage's time is fixed whatever the CPUs (4 ranks on 2 CPUs
-- wait, they do not compete) and its backward, one elementwise product,
-- costs nothing beside it; the bubble measured is then the schedule's and
-- the runtime's, not the machine's. Bubble: a step's wall time over the
-- rank's own work (micro-batches x its layers x forward_ms), less 1, the
-- median of `steps` steps on the slowest rank. Activations: each layer
-- keeps its input (width float32 values, one row a micro-batch) for its
-- backward, so the step's allocator peak over what was allocated before it
-- (accel.cpu_memory_stats), in layer inputs, is what the rank held; the
-- promise is the most micro-batches in flight over the rank's actions in
-- order (forwards run less backwards run), each keeping a layer input per
-- layer of its stage and the stage's output. Dead tensors the collector
-- has not yet taken count too (bindings/tensor_handle.cpp paces it: at
-- most 64 MiB of them, at least 4 MiB). Rank 0 prints a markdown table.
local nn = accel.nn
local core = require("accel.core")
local schedules = require("accel.parallel.pipeline.schedules")
local stage_runtime = require("accel.parallel.pipeline.stage_runtime")

local bench_options = dofile(arg[0]:match("(.*/)") .. "bench_options.lua")
local median = bench_options.median
local o = bench_options.parse("pipeline_schedules.lua", { forward_ms = 20, steps = 3, width = 262144 })

local acc = accel.Accelerator{}
local pp = acc.num_processes
local LAYERS = 8
local NAMES = {}
for i = 1, LAYERS do NAMES[i] = tostring(i) end

local Layer = nn.Module:extend("SleepingLayer")
function Layer:init(width)
  self.weight = nn.Parameter(core.ones({ width }))
end
function Layer:forward(x)
  core.live.sleep(o.forward_ms / 1000)
  return x * self.weight
end

-- The most layer inputs rank `rank`'s actions hold at once.
local function promised(schedule, rank, layers_per_stage)
  local held, most = 0, 0
  for _, a in ipairs(schedule.ranks[rank + 1]) do
    if a.kind == "F" then held = held + layers_per_stage + 1 end
    if a.kind == "B" then held = held - layers_per_stage - 1 end
    most = math.max(most, held)
  end
  return most
end

local rows = {}
local cases = {
  { "GPipe", 1, 4 }, { "GPipe", 1, 8 }, { "GPipe", 1, 16 },
  { "1F1B", 1, 4 }, { "1F1B", 1, 8 }, { "1F1B", 1, 16 },
  { "Interleaved1F1B", 2, 4 }, { "Interleaved1F1B", 2, 8 }, { "Interleaved1F1B", 2, 16 },
}
local mesh = accel.parallel.DeviceMesh.new(accel.ParallelismConfig{ pp_size = pp })
for _, case in ipairs(cases) do
  local name, v, m = case[1], case[2], case[3]
  local schedule = schedules.build(name, { pp = pp, microbatches = m, virtual_stages = v })
  local layers_per_stage = LAYERS / (pp * v)
  local stages = stage_runtime.build_stages{ layer_names = NAMES, build = function() return Layer(o.width) end,
                                             schedule = schedule, pp_rank = mesh.pp.rank }
  local pipe = stage_runtime.new{ group = mesh.pp.group, schedule = schedule, stages = stages,
                                  loss_fn = function(out) return out:mean() end }
  local x = core.ones({ m, o.width })
  local times, peaks = {}, {}
  for step = 0, o.steps do
    acc:wait_for_everyone()
    collectgarbage()
    accel.reset_peak_cpu_memory_stats()
    local before = accel.cpu_memory_stats().allocated_bytes
    local start = accel.time()
    pipe:step(x, x)
    local elapsed = accel.time() - start
    if step > 0 then  -- step 0 warms up
      times[#times + 1] = elapsed
      peaks[#peaks + 1] = accel.cpu_memory_stats().peak_allocated_bytes - before
    end
    for _, p in ipairs(pipe:parameters()) do p.grad = nil end
  end
  local work = m * LAYERS / pp * o.forward_ms / 1000
  local bubble = core.tensor(median(times) / work - 1)
  mesh.pp:all_reduce(bubble, "max")
  local held = core.tensor(median(peaks) / (o.width * 4))
  local all_held = mesh.pp:all_gather(held)
  if acc.is_main_process then
    local theory = (pp - 1) / (v * m)
    local held_text, promise_text = {}, {}
    for r = 0, pp - 1 do
      held_text[#held_text + 1] = string.format("%.1f", all_held[r + 1]:item())
      promise_text[#promise_text + 1] = tostring(promised(schedule, r, layers_per_stage))
    end
    rows[#rows + 1] = string.format("| %s | %d | %d | %.3f | %.3f | %.2f | %s | %s |", name, v, m, bubble:item(), theory,
                                    bubble:item() / theory, table.concat(held_text, " / "),
                                    table.concat(promise_text, " / "))
  end
end
if acc.is_main_process then
  print(string.format("PP %d, %d layers, forward %d ms a layer, %d steps (median; the slowest rank's bubble), "
                      .. "layer input %d KiB", pp, LAYERS, o.forward_ms, o.steps, math.floor(o.width * 4 / 1024)))
  print("")
  print("| schedule | v | micro-batches | bubble measured | (p-1)/(v m) | measured / theory | layer inputs held at peak, "
        .. "ranks 0-" .. (pp - 1) .. " | the schedule's most |")
  print("|---|---|---|---|---|---|---|---|")
  for _, row in ipairs(rows) do print(row) end
end
