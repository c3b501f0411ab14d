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
-- - Under tensor parallelism (PP x TP, PP x TP x FSDP) the recipe splits
--   the model after build_model (accel.parallel.tensor_parallel, before the
--   optimizer): the stages are read then, not at build_model
--   (deferred_loading.defer; tensor_parallel calls finish), each split
--   tensor as this tp rank's slice of the checkpoint's whole one, mapped
--   and narrowed, so no rank holds even a stage whole (a colwise slice is
--   rows that lie together in the file: only they are read; a rowwise one
--   is copied out of every row). A model never split stays empty and
--   prepare refuses it, naming tensor_parallel.
local args = require("accel.util.args")
local deferred_loading = require("accel.big_modeling.deferred_loading")
local model_stages = require("accel.parallel.pipeline.model_stages")
local schedules = require("accel.parallel.pipeline.schedules")
local stage_cut = require("accel.parallel.pipeline.stage_cut")
local tp_slice = require("accel.parallel.tp_slice")

local stage_loading = {}

local HOW = "acc:build_model(function() return accel.models.from_pretrained(dir) end)"

-- deferred_loading.fill's part under tensor parallelism: a tensor its
-- module splits over tp (tp_split_dims) is the checkpoint's whole one
-- (tp.size times as long along that dim) cut to this tp rank's slice.
local function tp_part(entry)
  local m = entry.module
  local dim = m.tp_split_dims and m:tp_split_dims()[entry.key]
  if not dim then return nil end
  local whole = entry.tensor:size()
  whole[dim] = whole[dim] * m.tp.size
  return whole, function(t) return tp_slice.slice(t, dim, m.tp, entry.name) end
end

-- The model fn builds (from_pretrained), empty but for the tensors of this
-- rank's stages, read from its checkpoint. `mesh`: the Accelerator's.
function stage_loading.build(fn, mesh)
  local where = "Accelerator:build_model"
  local config = mesh.config
  local model = deferred_loading.run(fn)
  if not deferred_loading.checkpoint(model) then return model end  -- prepare refuses its empty stages
  local cut = model_stages.cut(model)
  if not cut then
    args.error(string.format("%s: pp_size > 1 reads the stages of the causal LMs of model_type %s; a %s (model_type "
                             .. "%s) is not cut yet", where, model_stages.known(), model.__name,
                             tostring(model_stages.model_type(model))))
  end
  local schedule = schedules.of_config(config)
  local mine = {}  -- the layer names of this rank's stages
  for stage, names in ipairs(stage_cut.split(cut.of(model, { tied = true }).layer_names,
                                             { stages = schedule.stages })) do
    if schedule.placement[stage] == mesh.pp.rank then
      for _, name in ipairs(names) do mine[#mine + 1] = name end
    end
  end
  -- By name: tensor_parallel replaces the split modules.
  local function fill(at, part)
    local modules = {}
    for _, name in ipairs(mine) do modules[#modules + 1] = cut.module(model, name) end
    return deferred_loading.fill(model, modules, at, part)
  end
  if mesh.tp.size == 1 then return fill(where) end
  deferred_loading.defer(model, function()
    fill("accel.parallel.tensor_parallel (reading the stages of " .. where .. ")", tp_part)
  end)
  return model
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
                           .. "reads each rank's stages alone%s, or build the model with its weights (to train a "
                           .. "config's fresh weights by stages, save_pretrained them first; docs/api/parallelism.md)",
                           config.pp_size, empty[1], #empty > 1 and string.format(" and %d more", #empty - 1) or "",
                           HOW, config.tp_size > 1 and string.format(" (under tp_size = %d when "
                             .. "accel.parallel.tensor_parallel(model, acc.mesh) splits it: apply it after "
                             .. "build_model, before the optimizer and prepare)", config.tp_size) or ""))
end

return stage_loading
