-- A pretrained model built for a pipeline without any rank holding it
-- whole: acc:build_model under pp_size > 1 (accelerator_preparation.lua).
--   local model = acc:build_model(function() return accel.models.from_pretrained(dir) end)
--   local opt = accel.optim.AdamW(model:parameters(), { lr = 1e-4 })
--   model, opt = acc:prepare(model, opt)   -- cut as usual: this rank's stages
-- Every rank builds the model empty (big_modeling/deferred_loading.lua:
-- from_pretrained records its checkpoint instead of reading it), then reads
-- from the checkpoint the tensors of the layers its pp rank's stages hold,
-- cut as prepare cuts the model (the schedule's placement, stage_cut's even
-- split; pipeline_parallel.lua); every other module stays on the meta
-- device, never allocated. prepare refuses a rank whose stages still hold
-- meta tensors (refuse_empty): a model built empty with no checkpoint
-- behind it (from a config) has no values to give them.
--
-- Decisions:
-- - The stages are read at build_model, not at prepare: LibTorch cannot
--   give a meta tensor memory in place, so the loaded tensors are new ones,
--   and an optimizer made after build_model over model:parameters() holds
--   them (prepare takes the model and its optimizer in one call under
--   FSDP). Its other parameters stay on meta and never take a gradient.
-- - Tied embeddings: the one weight is read on both stages' ranks, by the
--   name the checkpoint holds (save_pretrained writes only
--   embed_tokens.weight), the last stage's lm_head and the embeddings then
--   sharing it as they do in the whole model.
-- - Each rank of a stage reads it (PP x DP, PP x FSDP: every dp rank), the
--   checkpoint's other tensors never read.
-- - Under tensor parallelism the model is split before prepare from whole
--   weights: refused, naming the sizes (build it with its weights).
local args = require("accel.util.args")
local deferred_loading = require("accel.big_modeling.deferred_loading")
local model_stages = require("accel.parallel.pipeline.model_stages")
local schedules = require("accel.parallel.pipeline.schedules")
local stage_cut = require("accel.parallel.pipeline.stage_cut")

local stage_loading = {}

local HOW = "acc:build_model(function() return accel.models.from_pretrained(dir) end)"

-- The model fn builds (from_pretrained), empty but for the tensors of this
-- rank's stages, read from its checkpoint. `mesh`: the Accelerator's.
function stage_loading.build(fn, mesh)
  local where = "Accelerator:build_model"
  local config = mesh.config
  if mesh.tp.size > 1 then
    args.error(string.format("%s under pp_size = %d and tp_size = %d is not implemented yet (%s; "
                             .. "docs/api/parallelism.md): tensor_parallel splits whole weights; build the model "
                             .. "with its weights (accel.models.from_pretrained(dir)), apply tensor_parallel, then "
                             .. "prepare", where, config.pp_size, config.tp_size, tostring(config)))
  end
  local model = deferred_loading.run(fn)
  if not deferred_loading.checkpoint(model) then return model end  -- prepare refuses its empty stages
  local cut = model_stages.cut(model)
  if not cut then
    args.error(string.format("%s: pp_size > 1 reads the stages of the causal LMs of model_type %s; a %s (model_type "
                             .. "%s) is not cut yet", where, model_stages.known(), model.__name,
                             tostring(model_stages.model_type(model))))
  end
  local schedule = schedules.of_config(config)
  local modules = {}
  for stage, names in ipairs(stage_cut.split(cut.of(model, { tied = true }).layer_names,
                                             { stages = schedule.stages })) do
    if schedule.placement[stage] == mesh.pp.rank then
      for _, name in ipairs(names) do modules[#modules + 1] = cut.module(model, name) end
    end
  end
  return deferred_loading.fill(model, modules, where)
end

-- Refuses, naming the tensors and what to do, a pipelined model
-- (pipelined_model.lua) whose stages hold tensors on the meta device.
function stage_loading.refuse_empty(model, config)
  local empty, names = {}, model.pipeline.names.stage
  for key, t in pairs(model:state_dict()) do
    if t.device == "meta" then empty[#empty + 1] = names[key] or key end
  end
  if #empty == 0 then return end
  table.sort(empty)
  args.error(string.format("Accelerator:prepare: pp_size = %d: this rank's stages hold %s%s on the meta device, with "
                           .. "no checkpoint to read them from (a model built empty: under acc:build_model or "
                           .. "accel.init_empty_weights, from a config); build a pretrained one with %s, which "
                           .. "reads each rank's stages alone, or build the model with its weights (to train a "
                           .. "config's fresh weights by stages, save_pretrained them first; docs/api/parallelism.md)",
                           config.pp_size, empty[1], #empty > 1 and string.format(" and %d more", #empty - 1) or "",
                           HOW))
end

return stage_loading
