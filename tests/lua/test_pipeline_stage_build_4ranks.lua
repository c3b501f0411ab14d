-- nproc: 4
-- A pretrained model built for a pipeline by stages under PP 2 x DP 2 and
-- PP 2 x FSDP 2: from a checkpoint in shards with an index, every rank
-- builds the model empty with acc:build_model(from_pretrained) and reads
-- only its stage's tensors, the other modules left on the meta device
-- through prepare (under FSDP the stage's parameters are its unit's
-- replacements, still not on meta); 10 AdamW steps with clipping over 4
-- micro-batches give one process's losses, norms and weights within 1e-5
-- (float32) against the model loaded whole, tied embeddings alike under
-- FSDP. PP 2 x TP 2 alike: the model stays empty through build_model and
-- tensor_parallel reads each rank's tp slices of its stage (split tensors
-- half their size, the rest on meta); a model never split is refused at
-- prepare, naming tensor_parallel.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local pipeline_check = dofile(arg[0]:match("(.*/)") .. "helpers/pipeline_check.lua")
local stage_build_check = dofile(arg[0]:match("(.*/)") .. "helpers/stage_build_check.lua")

local formats = require("accel.core").formats
local state = accel.PartialState()

for _, case in ipairs({ { name = "untied", runs = { { schedule = "1F1B", dp = 2 }, { schedule = "1F1B", dp_shard = 2 } } },
                        { name = "tied", config = { tie_word_embeddings = true },
                          runs = { { schedule = "GPipe", dp_shard = 2 } } } }) do
  local folder = stage_build_check.checkpoint(state, case.config, 4096)
  check.equal(formats.file_kind(folder .. "/model.safetensors.index.json"), "file",
              case.name .. ": the checkpoint is in shards with an index")
  local build = stage_build_check.from(folder)
  local ref = pipeline_check.reference(check, { build = build, config = case.config })
  for _, run in ipairs(case.runs) do
    run.build = build
    local acc, model, whole = pipeline_check.train(check, ref, run)
    stage_build_check.holds_stages_only(check, whole, model, string.format("%s at pp 2 x %s, rank %d", case.name,
                                                                           run.dp and "dp 2" or "dp_shard 2",
                                                                           acc.process_index))
  end
  state:wait_for_everyone()
  if state.is_main_process then formats.remove_folder(folder) end
end

-- PP 2 x TP 2 (llama's tp plan): build_model leaves the model empty and
-- tensor_parallel, splitting it on meta, reads this rank's stages' slices.
do
  local folder = stage_build_check.checkpoint(state, nil, 4096)
  local build = stage_build_check.from(folder)
  local ref = pipeline_check.reference(check, { build = build })
  local acc, model, whole = pipeline_check.train(check, ref, { schedule = "1F1B", tp = 2, build = build })
  local what = string.format("pp 2 x tp 2, rank %d", acc.process_index)
  stage_build_check.holds_stages_only(check, whole, model, what)
  pipeline_check.holds_slices(check, model, what)
  -- Not split: the stages stay empty and prepare says what to do.
  local unsplit = accel.Accelerator{ parallelism_config = accel.ParallelismConfig{ pp_size = 2, tp_size = 2 } }
  local empty = unsplit:build_model(function() return accel.models.from_pretrained(folder) end)
  for _, p in ipairs(empty:parameters()) do check.equal(p.device, "meta", "pp 2 x tp 2 before tensor_parallel: empty") end
  check.raises(function() unsplit:prepare(empty) end, "pp 2 x tp 2 without tensor_parallel",
               "on the meta device", "accel.parallel.tensor_parallel(model, acc.mesh) splits it")
  state:wait_for_everyone()
  if state.is_main_process then formats.remove_folder(folder) end
end
check.done("test_pipeline_stage_build_4ranks")
