-- nproc: 2 4
-- The pipeline's stage runtime (accel.parallel.pipeline.stage_runtime) over
-- real ranks, PP = the world: a Sequential-like model of 8 layers cut into
-- stages, each rank building only its own, run by GPipe, 1F1B,
-- Interleaved1F1B and InterleavedZeroBubble (2 stages per rank; its B the
-- input's gradient alone, its W the weights') with 4 micro-batches, gives one
-- process's gradients (every layer's, first step) and 10 AdamW steps'
-- losses and weights within 1e-5 (float32), the loss on every rank. Also:
-- a batch the micro-batches do not divide and stages given to the wrong
-- rank are refused naming the sizes.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local each_pair = dofile(arg[0]:match("(.*/)") .. "helpers/pipeline_check.lua").each_pair
local DeviceMesh = require("accel.parallel.device_mesh")
local schedules = require("accel.parallel.pipeline.schedules")
local stage_runtime = require("accel.parallel.pipeline.stage_runtime")
local nn, F = accel.nn, accel.nn.functional
local pp = accel.Accelerator{}.num_processes

-- Layer i is made from seed i, wherever it is made: the stages' layers are
-- the one-process model's.
local NAMES = { "1", "2", "3", "4", "5", "6", "7", "8" }
local function build(name)
  local i = tonumber(name)
  accel.manual_seed(100 + i)
  if i == #NAMES then return nn.Linear(12, 3) end
  return nn.Sequential(nn.Linear(i == 1 and 6 or 12, 12), nn.Tanh())
end

local function loss_fn(output, target) return F.mse_loss(output, target) end

local function whole_model()
  local layers = {}
  for _, name in ipairs(NAMES) do layers[#layers + 1] = build(name) end
  return nn.Sequential(unpack(layers))
end

local function batch(step)
  accel.manual_seed(1000 + step)
  return accel.randn({ 8, 6 }), accel.randn({ 8, 3 })
end

local function run(schedule_name, virtual_stages)
  local what = string.format("%s at pp %d, v %d", schedule_name, pp, virtual_stages)
  local config = accel.ParallelismConfig{ pp_size = pp, pp_schedule = schedule_name, pp_microbatches = 4,
                                          pp_virtual_stages = virtual_stages }
  local mesh = DeviceMesh.new(config)
  local schedule = schedules.build(schedule_name, { pp = pp, microbatches = 4, virtual_stages = virtual_stages })
  local stages = stage_runtime.build_stages{ layer_names = NAMES, build = build, schedule = schedule,
                                             pp_rank = mesh.pp.rank }
  local pipe = stage_runtime.new{ group = mesh.pp.group, schedule = schedule, stages = stages, loss_fn = loss_fn }
  local reference = whole_model()
  local opt = accel.optim.AdamW(pipe:parameters(), { lr = 1e-2, weight_decay = 0.01 })
  local ref_opt = accel.optim.AdamW(reference:parameters(), { lr = 1e-2, weight_decay = 0.01 })
  for step = 1, 10 do
    local x, y = batch(step)
    local loss = pipe:step(x, y)
    local ref_loss = loss_fn(reference(x), y)
    ref_loss:backward()
    check.near(loss, ref_loss:item(), 1e-5, what .. ": step " .. step .. "'s loss on pp rank " .. mesh.pp.rank)
    if step == 1 then
      for stage, seq in pairs(stages) do
        for i, name in ipairs(seq.pipeline_layer_names) do
          each_pair(seq[i], reference[tonumber(name)], function(pname, p, ref_p)
            check.near(p.grad, ref_p.grad, 1e-5, string.format("%s: stage %d layer %s %s's gradient", what, stage,
                                                                name, pname))
          end)
        end
      end
    end
    opt:step(); opt:zero_grad()
    ref_opt:step(); ref_opt:zero_grad()
  end
  for stage, seq in pairs(stages) do
    for i, name in ipairs(seq.pipeline_layer_names) do
      each_pair(seq[i], reference[tonumber(name)], function(pname, p, ref_p)
        check.near(p, ref_p, 1e-5, string.format("%s: stage %d layer %s %s after 10 steps", what, stage, name, pname))
      end)
    end
  end
  return mesh, schedule, stages
end

run("GPipe", 1)
run("1F1B", 1)
-- The zero-bubble schedule: each B the input's gradient alone, each W the
-- parameters' afterwards, the same gradients as one process.
run("InterleavedZeroBubble", 2)
local mesh, schedule, stages = run("Interleaved1F1B", 2)

local pipe = stage_runtime.new{ group = mesh.pp.group, schedule = schedule, stages = stages, loss_fn = loss_fn }
-- step{timings}: a time for each of this rank's F and B actions, none for its transfers.
local took = {}
pipe:step(accel.randn({ 8, 6 }), accel.randn({ 8, 3 }), { timings = took })
for i, a in ipairs(schedule.ranks[mesh.pp.rank + 1]) do
  local computes = a.kind == "F" or a.kind == "B"
  check.truthy(computes == (took[i] ~= nil) and (not computes or took[i] >= 0),
               string.format("timings: action %d (%s) %s", i, a.kind, computes and "timed" or "not timed"))
end
check.raises(function() pipe:step(accel.randn({ 6, 6 }), accel.randn({ 6, 3 })) end, "uneven batch",
             "rows do not cut into pp_microbatches = 4 equal micro-batches")
local wrong = {}
for stage in pairs(stages) do wrong[stage % schedule.stages + 1] = stages[stage] end
check.raises(function()
  stage_runtime.new{ group = mesh.pp.group, schedule = schedule, stages = wrong, loss_fn = loss_fn }
end, "stages on the wrong rank", "this rank (" .. mesh.pp.rank .. ")")
check.raises(function() stage_runtime.new{ group = mesh.pp.group, schedule = schedule, stages = stages } end,
             "loss_fn", "option 'loss_fn' is required")
check.done("pipeline stage runtime")
