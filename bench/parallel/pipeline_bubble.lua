-- The pipeline's bubble on real work: a stack of linears cut into stages,
-- each schedule's measured bubble against the bubble its own list of
-- actions promises for the times its actions take on this machine. The
-- zero-bubble schedule's gain needs a backward that costs: a linear's
-- forward, its input's gradient (B) and its weight's (W) are one product
-- each, so F : B : W is about 1 : 1 : 1, where pipeline_schedules.lua's
-- sleeping layers have a free backward.
--   accel-run bench/parallel/pipeline_bubble.lua --nproc 2 --threads 1 -- [width=1024] [rows=64] [steps=3]
-- One CPU core per rank (two ranks on this machine's two): with more
-- ranks than cores the ranks' products would share cores, and the time a
-- rank waits would be another's work.
-- Promised: each action of this rank's stages is timed alone first (F, B
-- and W on a micro-batch, the median of 5; B the whole backward where the
-- schedule has no W, and on stage 1, whose input needs no gradient), then
-- the schedule's actions are stepped in order on every rank with those
-- times, each starting when its rank is free and what it needs is done (F
-- of the stage before, B of the stage after), transfers taken as free: the
-- step's length over a rank's own work, less 1, on the slowest rank, is
-- the promise. With equal F and B + W it is the papers' (p - 1) / m for
-- GPipe and 1F1B and (p - 1) / (v m) interleaved. Measured: the step's
-- wall time over the same work, less 1, the median of `steps` steps on the
-- slowest rank. Rank 0 prints a markdown table.
local nn = accel.nn
local core = require("accel.core")
local schedules = require("accel.parallel.pipeline.schedules")
local stage_runtime = require("accel.parallel.pipeline.stage_runtime")

local bench_options = dofile(arg[0]:match("(.*/)") .. "bench_options.lua")
local median, timed = bench_options.median, bench_options.timed
local o = bench_options.parse("pipeline_bubble.lua", { width = 1024, rows = 64, steps = 3 })

local acc = accel.Accelerator{}
local pp = acc.num_processes
local LAYERS = 8
local NAMES = {}
for i = 1, LAYERS do NAMES[i] = tostring(i) end

local function loss_fn(out) return out:mean() end

-- The seconds stage `stage` (the module `module`) takes for each kind of
-- action on one micro-batch: {F =, B =, W =}.
local function action_times(schedule, stage, module)
  local times = { F = {}, B = {}, W = {} }
  local split = schedule.split_backward and stage > 1
  for _ = 1, 5 do
    local x = accel.randn(o.rows, o.width):requires_grad_(stage > 1)
    local y
    times.F[#times.F + 1] = timed(function()
      y = module(x)
      if stage == schedule.stages then y = loss_fn(y) end
    end)
    local grad = stage < schedule.stages and accel.randn(o.rows, o.width) or nil
    local handle
    times.B[#times.B + 1] = timed(function()
      if split then
        handle = core.autograd.input_backward(y, grad, x, module:parameters())
      else
        y:backward(grad)
      end
    end)
    times.W[#times.W + 1] = split and timed(function() handle:weight_backward() end) or 0
    for _, p in ipairs(module:parameters()) do p.grad = nil end
  end
  return { F = median(times.F), B = median(times.B), W = median(times.W) }
end

-- The slowest rank's bubble that `schedule` promises for the action times
-- `cost[stage][kind]`, and each rank's work (seconds).
local function promised(schedule, cost)
  local n = schedule.stages
  local done, free, next_action, work = {}, {}, {}, {}
  local function key(kind, stage, mb) return kind .. stage .. ":" .. mb end
  local lists = {}
  for r = 1, pp do
    lists[r], free[r], next_action[r], work[r] = {}, 0, 1, 0
    for _, a in ipairs(schedule.ranks[r]) do
      if a.kind == "F" or a.kind == "B" or a.kind == "W" then
        lists[r][#lists[r] + 1] = a
        work[r] = work[r] + cost[a.stage][a.kind]
      end
    end
  end
  local function needs(a)
    if a.kind == "F" then return a.stage > 1 and { key("F", a.stage - 1, a.microbatch) } or {} end
    if a.kind == "W" then return { key("B", a.stage, a.microbatch) } end
    local list = { key("F", a.stage, a.microbatch) }
    if a.stage < n then list[2] = key("B", a.stage + 1, a.microbatch) end
    return list
  end
  local left = 0
  for r = 1, pp do left = left + #lists[r] end
  while left > 0 do
    local stepped = false
    for r = 1, pp do
      local a = lists[r][next_action[r]]
      if a then
        local start, ready = free[r], true
        for _, k in ipairs(needs(a)) do
          if done[k] == nil then ready = false break end
          start = math.max(start, done[k])
        end
        if ready then
          free[r] = start + cost[a.stage][a.kind]
          done[key(a.kind, a.stage, a.microbatch)] = free[r]
          next_action[r], left, stepped = next_action[r] + 1, left - 1, true
        end
      end
    end
    if not stepped then error("pipeline_bubble.lua: the schedule's actions wait on each other", 0) end
  end
  local length, bubble = 0, 0
  for r = 1, pp do length = math.max(length, free[r]) end
  for r = 1, pp do bubble = math.max(bubble, length / work[r] - 1) end
  return bubble, work
end

local rows = {}
local cases = {}
for _, m in ipairs({ 4, 8 }) do
  for _, case in ipairs({ { "GPipe", 1 }, { "1F1B", 1 }, { "InterleavedZeroBubble", 1 }, { "Interleaved1F1B", 2 },
                          { "InterleavedZeroBubble", 2 } }) do
    cases[#cases + 1] = { case[1], case[2], m }
  end
end
local mesh = accel.parallel.DeviceMesh.new(accel.ParallelismConfig{ pp_size = pp })
for _, case in ipairs(cases) do
  local name, v, m = case[1], case[2], case[3]
  local schedule = schedules.build(name, { pp = pp, microbatches = m, virtual_stages = v })
  accel.manual_seed(1)
  local stages = stage_runtime.build_stages{ layer_names = NAMES, schedule = schedule, pp_rank = mesh.pp.rank,
                                             build = function() return nn.Linear(o.width, o.width) end }
  local pipe = stage_runtime.new{ group = mesh.pp.group, schedule = schedule, stages = stages, loss_fn = loss_fn }
  local mine = {}
  for stage, module in pairs(stages) do mine[tostring(stage)] = action_times(schedule, stage, module) end
  local x = accel.randn(m * o.rows, o.width)
  local times = {}
  for step = 0, o.steps do
    acc:wait_for_everyone()
    local elapsed = timed(function() pipe:step(x, x) end)
    if step > 0 then times[#times + 1] = elapsed end  -- step 0 warms up
    for _, p in ipairs(pipe:parameters()) do p.grad = nil end
  end
  local everyone = acc:gather_object(mine)
  local cost = {}
  for _, per_rank in ipairs(everyone) do
    for stage, t in pairs(per_rank) do cost[tonumber(stage)] = t end
  end
  local promise, work = promised(schedule, cost)
  local bubble = core.tensor(median(times) / work[mesh.pp.rank + 1] - 1)
  mesh.pp:all_reduce(bubble, "max")
  if acc.is_main_process then
    local c = cost[2] or cost[1]
    rows[#rows + 1] = string.format("| %s | %d | %d | %.1f / %.1f / %.1f | %.3f | %.3f | %.3f | %.2f |", name, v, m,
                                    c.F * 1000, c.B * 1000, c.W * 1000, (pp - 1) / (v * m), promise, bubble:item(),
                                    (1 + bubble:item()) / (1 + promise))
  end
end
if acc.is_main_process then
  print(string.format("PP %d, %d linears %d x %d, %d rows a micro-batch, one thread a rank, %d steps (median; the "
                      .. "slowest rank's bubble)", pp, LAYERS, o.width, o.width, o.rows, o.steps))
  print("")
  print("| schedule | v | micro-batches | stage 2's F / B / W ms | (p-1)/(v m) | promised | measured | "
        .. "measured / promised step |")
  print("|---|---|---|---|---|---|---|---|")
  for _, row in ipairs(rows) do print(row) end
end
