-- The pipeline's bubble on real work: a stack of linears cut into stages,
-- each schedule's measured bubble against the bubble its own list of
-- actions promises for the times its actions took. The zero-bubble
-- schedule's gain needs a backward that costs: a linear's forward, its
-- input's gradient (B) and its weight's (W) are one product each, so
-- F : B : W is about 1 : 1 : 1, where pipeline_schedules.lua's sleeping
-- layers have a free backward.
--   accel-run bench/parallel/pipeline_bubble.lua --nproc 2 --threads 1 -- [width=1024] [rows=64] [steps=3]
-- One CPU core per rank (two ranks on this machine's two): with more
-- ranks than cores the ranks' products would share cores, and the time a
-- rank waits would be another's work.
-- Each step records the seconds every F, B and W action computed on each
-- rank (stage_runtime's step{timings}: from when its input or gradient
-- arrived to its end; B the whole backward where the schedule has no W,
-- and on stage 1, whose input needs no gradient). Promised: the schedule's
-- actions stepped in order on every rank with those times, each starting
-- when its rank is free and what it needs is done (F of the stage before,
-- B of the stage after), transfers taken as free: the step's length over
-- a rank's own work (the sum of its actions' times), less 1, on the
-- slowest rank. With equal F and B + W it is the papers' (p - 1) / m for
-- GPipe and 1F1B and (p - 1) / (v m) interleaved. Measured: the step's
-- wall time over the same work, less 1, on the slowest rank. Both the
-- median of `steps` steps. Rank 0 prints a markdown table.
local nn = accel.nn
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

-- The slowest rank's bubble that `schedule` promises for the seconds its
-- actions took (`took[r][i]`: rank r - 1's action i, F, B and W only), and
-- each rank's work (seconds).
local function promised(schedule, took)
  local n = schedule.stages
  local done, free, next_action, work = {}, {}, {}, {}
  local function key(kind, stage, mb) return kind .. stage .. ":" .. mb end
  local lists = {}
  for r = 1, pp do
    lists[r], free[r], next_action[r], work[r] = {}, 0, 1, 0
    for i, a in ipairs(schedule.ranks[r]) do
      if a.kind == "F" or a.kind == "B" or a.kind == "W" then
        lists[r][#lists[r] + 1] = { action = a, seconds = took[r][i] or 0 }
        work[r] = work[r] + (took[r][i] or 0)
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
      local entry = lists[r][next_action[r]]
      local a = entry and entry.action
      if a then
        local start, ready = free[r], true
        for _, k in ipairs(needs(a)) do
          if done[k] == nil then ready = false break end
          start = math.max(start, done[k])
        end
        if ready then
          free[r] = start + entry.seconds
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
  local x = accel.randn(m * o.rows, o.width)
  local promises, bubbles, stage2 = {}, {}, { F = {}, B = {}, W = {} }
  for step = 0, o.steps do
    acc:wait_for_everyone()
    local took = {}
    local elapsed = timed(function() pipe:step(x, x, { timings = took }) end)
    for _, p in ipairs(pipe:parameters()) do p.grad = nil end
    local mine = { elapsed = elapsed, took = {} }  -- string keys: gathered as an object
    for i, seconds in pairs(took) do mine.took[tostring(i)] = seconds end
    local everyone = acc:gather_object(mine)
    if step > 0 then  -- step 0 warms up
      local by_rank = {}
      for r, theirs in ipairs(everyone) do
        by_rank[r] = {}
        for i, seconds in pairs(theirs.took) do by_rank[r][tonumber(i)] = seconds end
      end
      local promise, work = promised(schedule, by_rank)
      local bubble = 0
      for r = 1, pp do
        bubble = math.max(bubble, everyone[r].elapsed / work[r] - 1)
      end
      promises[#promises + 1], bubbles[#bubbles + 1] = promise, bubble
      for i, a in ipairs(schedule.ranks[schedule.placement[2] + 1]) do
        if a.stage == 2 and stage2[a.kind] then
          stage2[a.kind][#stage2[a.kind] + 1] = by_rank[schedule.placement[2] + 1][i] or 0
        end
      end
    end
  end
  if acc.is_main_process then
    local promise, bubble = median(promises), median(bubbles)
    local function ms(list) return #list > 0 and median(list) * 1000 or 0 end
    rows[#rows + 1] = string.format("| %s | %d | %d | %.1f / %.1f / %.1f | %.3f | %.3f | %.3f | %.2f |", name, v, m,
                                    ms(stage2.F), ms(stage2.B), ms(stage2.W),
                                    (pp - 1) / (v * m), promise, bubble, (1 + bubble) / (1 + promise))
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
