-- nproc: 4
-- PP 2 x TP 2 through the Accelerator (ParallelismConfig{pp_size = 2,
-- tp_size = 2}): the recipe makes the model tensor parallel
-- (accel.parallel.tensor_parallel over acc.mesh) and prepare cuts the
-- split model into stages by its module names; ranks {0, 1} hold stage 1's
-- tp slices and {2, 3} stage 2's, each pp group ({0, 2}, {1, 3}) passing
-- the full hidden states between its tp rank's stages. For GPipe, 1F1B,
-- Interleaved1F1B and InterleavedZeroBubble (2 stages per rank), with and without accumulating
-- over 2 micro-steps, with llama's own plan (lm_head's logits gathered) and
-- a vocabulary-parallel head (its logits split, the pipelined loss over
-- tp), 10 AdamW steps with clipping (which acts: the norm counts each
-- split weight's slices over tp and the stages over pp, each weight once)
-- of a small Llama give one process's losses, gradient norms and full
-- weights (acc:get_state_dict) within 1e-5 (float32); fp16 (on the CPU the
-- loss scale only) alike. save_model writes one process's model, which
-- load_model reads back into each rank's slices; save_state's checkpoints
-- (a pipeline's: whole tensors by the whole model's names, written by
-- each stage's first tp rank) resume exactly, mid-accumulation too, load at
-- PP 2 x DP 2 and at TP 2 x DP 2 (no pipeline), and a PP 2 x DP 2
-- checkpoint loads at PP 2 x TP 2; sequence parallelism under a pipeline
-- is refused naming it.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local pipeline_check = dofile(arg[0]:match("(.*/)") .. "helpers/pipeline_check.lua")

local vocab_parallel = pipeline_check.vocab_parallel_plan()

-- A rank's stages hold its tp slices (half of each split parameter), and
-- the hidden states its first stage hands on are whole and equal on both
-- tp ranks.
local function holds_slices(acc, model, what)
  pipeline_check.holds_slices(check, model, what)
  local first = model.pipeline.stages[model.pipeline.held[1]]
  if acc.mesh.pp.rank == 0 then
    local h = accel.no_grad(function() return first(pipeline_check.batch(1):narrow(1, 1, 2)) end)
    check.equal(table.concat(h:size(), "x"), "2x" .. pipeline_check.T .. "x16", what .. ": stage 1 sends whole hidden states")
    local both = acc.mesh.tp:all_gather(h:contiguous())
    check.near(both[1], both[2], 0, what .. ": stage 1's hidden states equal on both tp ranks")
  end
end

local ref = pipeline_check.reference(check)
local acc, model
for _, run in ipairs({ { schedule = "GPipe", tp = 2 },
                       -- The zero-bubble schedule: W reruns each op holding a tp slice.
                       { schedule = "InterleavedZeroBubble", virtual_stages = 2, tp = 2, accumulation = 2 },
                       { schedule = "InterleavedZeroBubble", virtual_stages = 2, tp = 2, plan = vocab_parallel },
                       { schedule = "1F1B", tp = 2 },
                       { schedule = "1F1B", tp = 2, accumulation = 2 },
                       { schedule = "Interleaved1F1B", virtual_stages = 2, tp = 2 },
                       { schedule = "1F1B", tp = 2, plan = vocab_parallel },
                       { schedule = "Interleaved1F1B", virtual_stages = 2, tp = 2, accumulation = 2,
                         plan = vocab_parallel } }) do
  acc, model = pipeline_check.train(check, ref, run)
  holds_slices(acc, model, run.schedule .. " v" .. (run.virtual_stages or 1) .. (run.plan and " vocab-parallel" or ""))
  local head = model.pipeline.stages[model.pipeline.schedule.stages]
  if head then
    local lm_head = head[#head]
    check.equal(lm_head.gather_output, run.plan == nil, "the last stage's lm_head gathers its logits per the plan")
  end
end
local mesh, rank = acc.mesh, acc.process_index
check.equal(table.concat(mesh.tp.ranks, ","), rank < 2 and "0,1" or "2,3", "tp: the pair holding a stage")
check.equal(table.concat(mesh.pp.ranks, ","), (rank % 2) .. "," .. (rank % 2 + 2), "pp: one rank per stage")
check.equal(mesh.dp.size, 1, "no data parallel: the four ranks see the same batches")

-- fp16 on the CPU scales the loss only: float32's numbers.
pipeline_check.train(check, ref, { schedule = "1F1B", tp = 2, mixed_precision = "fp16" })

local function pp_tp(schedule, virtual_stages)
  return accel.Accelerator{ parallelism_config = accel.ParallelismConfig{
    pp_size = 2, tp_size = 2, pp_schedule = schedule, pp_microbatches = 4, pp_virtual_stages = virtual_stages } }
end

-- save_model gathers the stages' tp slices and writes the whole model as
-- one process would; load_model gives each rank its slices of it.
local root = os.getenv("ACCEL_TEST_TMPDIR") or "/tmp"
local folder = acc:gather_object(string.format("%s/pipeline_tp_%d_%d", root, os.time(), math.random(1e9)))[1]
acc:save_model(model, folder)
local saved = acc:get_state_dict(model)
for name, t in pairs(ref.model:state_dict()) do
  check.equal(table.concat(saved[name]:size(), "x"), table.concat(t:size(), "x"), "get_state_dict's whole " .. name)
end
local fresh_acc = pp_tp("Interleaved1F1B", 2)
local fresh_base = accel.parallel.tensor_parallel(pipeline_check.tiny(nil, nil, 5), fresh_acc.mesh)
local fresh = fresh_acc:prepare(fresh_base)
fresh_acc:load_model(fresh, folder)
local loaded = fresh_acc:get_state_dict(fresh)
for name, t in pairs(saved) do check.near(loaded[name], t, 0, "load_model under PP x TP: " .. name) end

-- Checkpoints: 6 steps of 2 micro-steps at PP 2 x TP 2, saved
-- mid-accumulation (after step 3's first micro-step: each rank's summed
-- slices are saved too) and at step 4; a fresh Accelerator on a model from
-- other weights loads each and trains on to the uninterrupted run's losses
-- and weights. The files are a pipeline's, so step 4's loads at PP 2 x DP
-- 2 and at TP 2 x DP 2 (no pipeline: each tp rank keeps its slices), and a
-- PP 2 x DP 2 checkpoint loads at PP 2 x TP 2, training on alike.
do
  local STEPS, ACCUMULATION, TOL = 6, 2, 1e-6
  local ptp, pdp = { tp = 2 }, { dp = 2 }
  local function setup(seed, sizes)
    local run = { acc = accel.Accelerator{ gradient_accumulation_steps = ACCUMULATION,
      parallelism_config = accel.ParallelismConfig{ pp_size = sizes.pp or 2, tp_size = sizes.tp or 1,
                                                    dp_replicate_size = sizes.dp or 1, pp_microbatches = 4 } } }
    local base = pipeline_check.tiny(nil, nil, seed)
    if sizes.tp then base = accel.parallel.tensor_parallel(base, run.acc.mesh) end
    run.model, run.opt = run.acc:prepare(base, accel.optim.AdamW(base:parameters(), { lr = 1e-2, weight_decay = 0.01 }))
    return run
  end
  local schedule = { steps = STEPS, accumulation = ACCUMULATION, max_norm = 0.5 }
  local at_step4
  pipeline_check.save_and_resume(check, {
    setup = setup, schedule = schedule, tol = TOL, folder = folder,
    names = { [ptp] = "PP 2 x TP 2", [pdp] = "PP 2 x DP 2" },
    savings = { { ptp, "tp", { { "mid", 6, ptp }, { "step4", 9, ptp }, { "step4", 9, pdp } } },
                { pdp, "dp", { { "step4", 9, ptp } } } },
    after_save = function(run, sizes) if sizes == ptp then at_step4 = run.acc:get_state_dict(run.model) end end })
  -- The stages' first tp ranks wrote the pipeline's files, whole tensors.
  local listed = {}
  for _, r in ipairs({ 0, 1, 2, 3 }) do
    local f = io.open(folder .. "/tp/step4/model_rank_" .. r .. ".safetensors", "rb")
    listed[#listed + 1] = f and tostring(r) or nil
    if f then f:close() end
  end
  check.equal(table.concat(listed, ","), "0,2", "PP 2 x TP 2's checkpoint: written by ranks 0 and 2 (tp rank 0)")
  -- At TP 2 x DP 2 (no pipeline) every rank reads the whole tensors and keeps its tp slices.
  local tp_dp = setup(9, { pp = 1, tp = 2, dp = 2 })
  tp_dp.acc:load_state(folder .. "/tp/step4")
  local state = tp_dp.acc:get_state_dict(tp_dp.model)
  for name, t in pairs(at_step4) do
    check.near(state[name], t, 0, "PP 2 x TP 2's checkpoint loaded at TP 2 x DP 2: " .. name)
  end
end
acc:wait_for_everyone()
if rank == 0 then os.execute("rm -rf '" .. folder .. "'") end

-- Sequence parallelism splits the hidden states between the tp regions
-- over the sequence: refused under a pipeline, naming it.
check.raises(function()
  local sp_acc = pp_tp("1F1B")
  sp_acc:prepare(accel.parallel.tensor_parallel(pipeline_check.tiny(), sp_acc.mesh, nil, { sequence_parallel = true }))
end, "sequence parallelism under PP", "pp_size = 2 with sequence parallelism", "splits the sequence")
check.done("pipeline pp x tp")
