-- Accelerator:save_state's part for split models (checkpointing/save.lua
-- writes the rest): what is gathered before any rank writes, the files
-- each rank writes of its own slices, and the layouts the main process
-- writes so that a load on another layout can cut them again
-- (docs/api/sharding.md, docs/api/parallelism.md "Checkpoints under a
-- mesh"; a pipeline's in pipeline_checkpoint.lua, split experts' in
-- expert_checkpoint.lua). `c.split` is the SplitCheckpoint (split_checkpoint.lua).
local layout = require("accel.checkpointing.layout")
local flat_shards = require("accel.parallel.checkpoint.flat_shards")
local tp_slices = require("accel.parallel.checkpoint.tp_slices")
local pipeline_checkpoint = require("accel.parallel.checkpoint.pipeline_checkpoint")
local expert_checkpoint = require("accel.parallel.checkpoint.expert_checkpoint")

local write_split = {}

-- Models whose ranks write their own flat shards (SHARDED_STATE_DICT of a
-- sharded model): i -> {model, sharded, optimizer (the engine's), j (its
-- number), layout}.
local function per_rank_models(c)
  local out = {}
  if not c.split.per_rank then return out end
  for i, model in ipairs(c.models) do
    local sharded = c.split:sharded(model)
    if sharded then
      local flats = c.split:flat_layout(model)
      local j = c.split:optimizer_of(c.optimizers, model)
      flats.optimizer = j
      out[i] = { model = model, sharded = sharded, optimizer = c.split:shard_optimizer(model), j = j, layout = flats }
    end
  end
  return out
end

-- Under a mesh: how its tensors are split (out.splits), and with
-- FULL_STATE_DICT every model's and optimizer's full state, gathered over
-- dp_shard (a sharded model's flat parameters; its optimizer's state_dict)
-- then over tp (collectives, on every rank, in the same order).
local function full_mesh_states(c, out)
  local tp = c.split.mesh.tp
  out.splits = c.split:mesh_splits(c.models, c.optimizers)
  if c.split.per_rank then return out end
  for i, model in ipairs(c.models) do
    out.models[i] = tp_slices.gather("model", c.split:full_model_state(model), out.splits.models[i], tp)
  end
  for j, opt in ipairs(c.optimizers) do
    out.optimizers[j] = tp_slices.gather("optimizer", opt:state_dict(), out.splits.optimizers[j], tp)
  end
  return out
end

-- The full state of split models and of their optimizers, gathered on
-- every rank (collectives) before any rank writes: {models = {[i] =
-- state}, optimizers = {[j] = state}, splits = under a mesh}; a model or
-- optimizer absent from it is written as it is.
function write_split.full_states(c)
  if pipeline_checkpoint.applies(c) then return pipeline_checkpoint.full_states(c) end
  if expert_checkpoint.applies(c) then return expert_checkpoint.full_states(c) end
  local out = { models = {}, optimizers = {} }
  if c.split.mesh then return full_mesh_states(c, out) end
  if c.split.per_rank then return out end
  return c.split:gather_sharded(c.models, c.optimizers, out)
end

-- Writes this rank's own slices (SHARDED_STATE_DICT; a pipeline's
-- stages) with `tensors_file(name, pairs)`; `full` is what full_states
-- gathered. Returns what they hold, {models = {[i] = true}, optimizers =
-- {[j] = true}, flats = {[i] = flat layout}}, which the main process then
-- does not write whole.
function write_split.rank_files(c, rank, tensors_file, full)
  if pipeline_checkpoint.applies(c) then return pipeline_checkpoint.rank_files(c, rank, tensors_file, full) end
  if expert_checkpoint.applies(c) then return expert_checkpoint.rank_files(c, rank, tensors_file, full) end
  local written = { models = {}, optimizers = {}, flats = {} }
  for i, m in pairs(per_rank_models(c)) do
    tensors_file(layout.names.model_slices(i, rank), flat_shards.model_tensors(m.sharded, m.model))
    tensors_file(layout.names.optimizer_slices(m.j, rank), layout.sorted_pairs(m.optimizer:state_dict()))
    written.models[i], written.optimizers[m.j], written.flats[i] = true, true, m.layout
  end
  -- Under a mesh with SHARDED_STATE_DICT every rank writes its own tp
  -- slices of every model and optimizer not sharded over dp_shard (whose
  -- flat shards it wrote above; the mesh layout says how they split).
  if c.split.mesh and c.split.per_rank then
    for i, model in ipairs(c.models) do
      if not written.models[i] then
        tensors_file(layout.names.model_slices(i, rank), layout.sorted_pairs(model:state_dict()))
        written.models[i] = true
      end
    end
    for j, opt in ipairs(c.optimizers) do
      if not written.optimizers[j] then
        tensors_file(layout.names.optimizer_slices(j, rank), layout.sorted_pairs(opt:state_dict()))
        written.optimizers[j] = true
      end
    end
  end
  return written
end

-- The main process's layout files: the mesh's (how each tensor splits),
-- written first; `full` is what full_states gathered.
function write_split.mesh_layout(c, lua_file, full)
  if not c.split.mesh then return end
  if pipeline_checkpoint.applies(c) then return pipeline_checkpoint.layout_file(c, lua_file, full) end
  if expert_checkpoint.applies(c) then return expert_checkpoint.layout_file(c, lua_file) end
  lua_file(layout.names.mesh, tp_slices.layout(c.split.mesh, full.splits, c.state.num_processes,
                                               c.split.per_rank and "SHARDED_STATE_DICT" or "FULL_STATE_DICT"))
end

-- Model i's flat layout, when its ranks wrote their flat shards
-- (`written` from rank_files); returns whether it did.
function write_split.flat_layout(i, lua_file, written)
  local flats = written.flats[i]
  if flats then lua_file(layout.names.sharding(i), flats) end
  return flats ~= nil
end

return write_split
