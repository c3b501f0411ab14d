-- nproc: 4
-- A pretrained model built for a pipeline by stages under PP 2 x DP 2 and
-- PP 2 x FSDP 2: from a checkpoint in shards with an index, every rank
-- builds the model empty with acc:build_model(from_pretrained) and reads
-- only its stage's tensors, the other modules left on the meta device
-- through prepare (under FSDP the stage's parameters are its unit's
-- replacements, still not on meta); 10 AdamW steps with clipping over 4
-- micro-batches give one process's losses, norms and weights within 1e-5
-- (float32) against the model loaded whole, tied embeddings alike under
-- FSDP. PP 2 x TP 2 is refused at build_model naming the sizes.
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

local acc = accel.Accelerator{ parallelism_config = accel.ParallelismConfig{ pp_size = 2, tp_size = 2 } }
check.raises(function() acc:build_model(function() return pipeline_check.tiny() end) end, "build_model under PP x TP",
             "Accelerator:build_model under pp_size = 2 and tp_size = 2 is not implemented yet",
             "apply tensor_parallel, then prepare")
check.done("test_pipeline_stage_build_4ranks")
