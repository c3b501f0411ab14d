-- nproc: 8
-- A pretrained model built by stages under PP 2 x TP 2 x FSDP 2: from a
-- checkpoint, acc:build_model leaves the model empty, tensor_parallel
-- splits it on meta and reads this rank's tp slices of its stage, and
-- prepare shards those over the dp_shard pair (each rank's flat shards
-- half its slices); the modules outside the stage stay on meta. 10 AdamW steps with clipping over 4 micro-batches
-- give one process's losses, norms and full weights (acc:get_state_dict)
-- within 1e-5 (float32), against the model loaded whole.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local pipeline_check = dofile(arg[0]:match("(.*/)") .. "helpers/pipeline_check.lua")
local stage_build_check = dofile(arg[0]:match("(.*/)") .. "helpers/stage_build_check.lua")

local formats = require("accel.core").formats
local state = accel.PartialState()

local folder = stage_build_check.checkpoint(state, nil, 4096)
local build = stage_build_check.from(folder)
local ref = pipeline_check.reference(check, { build = build })
local acc, model, whole = pipeline_check.train(check, ref, { schedule = "1F1B", tp = 2, dp_shard = 2, build = build })
local what = string.format("pp 2 x tp 2 x dp_shard 2, rank %d", acc.process_index)
stage_build_check.holds_stages_only(check, whole, model, what)
pipeline_check.holds_half_slices(check, acc, model, what)
state:wait_for_everyone()
if state.is_main_process then formats.remove_folder(folder) end
check.done("test_pipeline_stage_build_8ranks")
