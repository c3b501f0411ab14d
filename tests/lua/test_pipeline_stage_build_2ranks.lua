-- nproc: 2
-- A pretrained model built for a pipeline by stages (PP 2): each rank
-- builds the model empty with acc:build_model(from_pretrained) and reads
-- only its stage's tensors from the checkpoint, the other modules left on
-- the meta device through prepare; 10 AdamW steps with clipping over 4
-- micro-batches (GPipe, 1F1B, and Interleaved1F1B: two stages a rank)
-- give one process's losses, norms and weights within 1e-5 (float32),
-- against the model loaded whole; tied embeddings alike (the checkpoint
-- holding only embed_tokens.weight, read on both stages), whose
-- save_state resumes in a model built whole or by stages. Refused: a
-- model built empty from a config (no checkpoint behind it) at prepare,
-- naming what to do, and from_pretrained's big-model options under
-- build_model, naming the option.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local pipeline_check = dofile(arg[0]:match("(.*/)") .. "helpers/pipeline_check.lua")
local stage_build_check = dofile(arg[0]:match("(.*/)") .. "helpers/stage_build_check.lua")

local formats = require("accel.core").formats
local state = accel.PartialState()

for _, case in ipairs({ { name = "untied", runs = { { schedule = "GPipe" }, { schedule = "1F1B" },
                                                    { schedule = "Interleaved1F1B", virtual_stages = 2 } } },
                        { name = "tied", config = { tie_word_embeddings = true }, runs = { { schedule = "1F1B" } } } }) do
  local folder = stage_build_check.checkpoint(state, case.config)
  local build = stage_build_check.from(folder)
  if case.config then
    local reader = formats.open_weights(folder)
    local names = {}
    for _, n in ipairs(reader:names()) do names[n] = true end
    reader:close()
    check.truthy(names["model.embed_tokens.weight"] and not names["lm_head.weight"],
                 "the tied checkpoint holds the embeddings under embed_tokens.weight alone")
  end
  local ref = pipeline_check.reference(check, { build = build, config = case.config })
  local saved = folder .. "-state"
  for _, run in ipairs(case.runs) do
    local schedule = run.schedule
    run.build, run.save = build, case.config and { saved, step = 5 }
    local acc, model, whole = pipeline_check.train(check, ref, run)
    stage_build_check.holds_stages_only(check, whole, model, string.format("%s %s (v %d), rank %d", case.name,
                                                                           schedule, run.virtual_stages or 1,
                                                                           acc.process_index))
    if case.config then
      local tied = whole.lm_head.weight
      check.truthy(rawequal(tied, whole.model.embed_tokens.weight) and tied.device ~= "meta",
                   "tied: both stages' ranks read the one weight")
      -- save_state after step 5 (the optimizer holding the meta parameters
      -- too) resumes in a model built whole and in one built by stages,
      -- ending where the run that went on ends.
      local final = acc:get_state_dict(model)
      for _, resume_build in ipairs({ false, build }) do
        local again_acc, again = pipeline_check.train(check, ref, { schedule = schedule, build = resume_build or nil,
                                                                    resume = { saved, step = 5 } })
        local state_now = again_acc:get_state_dict(again)
        for name, t in pairs(final) do
          check.near(state_now[name], t, 0, string.format("tied, resumed after step 5 in a model built %s: %s",
                                                          resume_build and "by stages" or "whole", name))
        end
      end
    end
  end
  state:wait_for_everyone()
  if state.is_main_process and case.config then formats.remove_folder(saved) end
  state:wait_for_everyone()
  if state.is_main_process then formats.remove_folder(folder) end
end

-- Refused at prepare: stages with no checkpoint behind them.
local function pp2() return accel.Accelerator{ parallelism_config = accel.ParallelismConfig{ pp_size = 2 } } end
local acc = pp2()
local empty = acc:build_model(function() return accel.models.from_config(pipeline_check.TINY) end)
check.equal(empty.lm_head.weight.device, "meta", "build_model under pp builds a model from a config empty")
check.raises(function() acc:prepare(empty) end, "prepare of a model built empty from a config",
             "Accelerator:prepare: pp_size = 2: this rank's stages hold ", "on the meta device, with no checkpoint",
             "acc:build_model(function() return accel.models.from_pretrained(dir) end)")
acc = pp2()
local by_hand = accel.init_empty_weights(function() return pipeline_check.tiny() end)
check.raises(function() acc:prepare(by_hand) end, "prepare of a model built under init_empty_weights",
             "on the meta device, with no checkpoint")
local folder = stage_build_check.checkpoint(state)
check.raises(function() acc:build_model(function() return accel.models.from_pretrained(folder, { device_map = "auto" })
                                        end) end,
             "from_pretrained's device_map under a pipeline's build_model",
             "accel.models.from_pretrained: device_map is not supported under a pipeline's acc:build_model")
state:wait_for_everyone()
if state.is_main_process then formats.remove_folder(folder) end
check.done("test_pipeline_stage_build_2ranks")
