-- What a checkpoint asks about how the Accelerator's models are split
-- (checkpointing.lua's `c.split`): which models are sharded (ZeRO / FSDP)
-- and by which optimizer, their flat layouts (flat_shards.lua), how the
-- tensors split over tp (tp_slices.lua), where the accumulated gradients
-- are, and whether each rank writes its own slices (SHARDED_STATE_DICT).
-- Made from the ParallelDims and the prepared models' layouts
-- (parallel_dims.lua, model_layout.lua); write_split.lua and
-- read_split.lua cut, save, load and reshard by it (a pipeline's by
-- pipeline_checkpoint.lua, split experts' by expert_checkpoint.lua).
local flat_shards = require("accel.parallel.checkpoint.flat_shards")
local tp_slices = require("accel.parallel.checkpoint.tp_slices")
local optimizer_names = require("accel.parallel.checkpoint.optimizer_names")

local SplitCheckpoint = {}
SplitCheckpoint.__index = SplitCheckpoint

-- `layouts`: the ModelLayouts in preparation order.
function SplitCheckpoint.new(dims, layouts)
  local by_model, pipelined = {}, false
  for _, layout in ipairs(layouts) do
    by_model[layout.model] = layout
    pipelined = pipelined or layout.pipelined == true
  end
  return setmetatable({
    dims = dims,
    mesh = dims.mesh,  -- nil without a parallelism_config
    -- Each rank writes its own slices (SHARDED_STATE_DICT).
    per_rank = dims.state_dict_type == "SHARDED_STATE_DICT",
    -- The models are a pipeline's stages (pipeline_checkpoint.lua).
    pipelined = pipelined,
    _layouts = by_model,
  }, SplitCheckpoint)
end

-- The ShardedModel of `model`, or nil.
function SplitCheckpoint:sharded(model)
  local layout = self._layouts[model]
  return layout and layout.sharded
end

-- The engine optimizer stepping sharded `model`'s shards.
function SplitCheckpoint:shard_optimizer(model)
  return self._layouts[model].optimizer
end

-- The number, among `optimizers` (the prepared ones), of the optimizer
-- stepping `model`'s shards.
function SplitCheckpoint:optimizer_of(optimizers, model)
  local engine = self:shard_optimizer(model)
  for j, opt in ipairs(optimizers) do
    if opt.optimizer == engine then return j end
  end
  error("the optimizer of a sharded model was not prepared with it", 0)
end

-- The flat layout of sharded `model` (flat_shards.lua), cut over the
-- shard group (ParallelDims:shard_count).
function SplitCheckpoint:flat_layout(model)
  local layout = self._layouts[model]
  return flat_shards.layout(layout.sharded, layout.optimizer, layout.param_names, self.dims:shard_count())
end

-- This rank's place in the shard group.
function SplitCheckpoint:shard_rank()
  return self.dims:shard_rank()
end

-- Under a mesh: how `models` and `optimizers` are split over tp
-- (tp_slices.splits), an optimizer of a sharded model by its flat
-- layout's names.
function SplitCheckpoint:mesh_splits(models, optimizers)
  local sharded = {}
  for i, model in ipairs(models) do
    if self:sharded(model) then
      sharded[self:optimizer_of(optimizers, model)] = { model = i, layout = self:flat_layout(model) }
    end
  end
  return tp_slices.splits(models, optimizers, sharded)
end

-- The tp dim the models in force are split over, or nil.
function SplitCheckpoint:tp()
  return self.dims:tp()
end

-- The ep dim the models' experts are split over, or nil.
function SplitCheckpoint:ep()
  return self.dims:ep()
end

-- The names of prepared optimizer `opt`'s parameters by index, and its
-- groups' sizes (optimizer_names.lua), in the layout its state_dict has:
-- for the optimizer of a sharded model as prepare recorded them, before
-- sharding; else found among `models` now.
function SplitCheckpoint:optimizer_layout(opt, models)
  for _, layout in pairs(self._layouts) do
    local original = layout.original_optimizer
    if original and original.optimizer == opt.optimizer then return original.layout end
  end
  return optimizer_names(opt, models)
end

-- name -> tensor whose .grad holds this rank's accumulated gradient
-- (model_layout.lua).
function SplitCheckpoint:gradient_holders(model)
  return self._layouts[model]:named_gradient_holders()
end

-- fn() with `model`'s full parameters in place (a collective when sharded).
function SplitCheckpoint:with_full_parameters(model, fn, written)
  return self._layouts[model]:with_full_parameters(fn, written)
end

-- A copy of `model`'s state dict with its full parameters (gathered when sharded).
function SplitCheckpoint:full_model_state(model)
  return self:with_full_parameters(model, function()
    local state = {}
    for name, t in pairs(model:state_dict()) do state[name] = t:clone() end
    return state
  end)
end

-- Into out.models and out.optimizers: the full state of each sharded
-- model among `models` and of each optimizer among `optimizers` that
-- gathers its shards' (collectives, on every rank in the same order).
function SplitCheckpoint:gather_sharded(models, optimizers, out)
  for i, model in ipairs(models) do
    if self:sharded(model) then out.models[i] = self:full_model_state(model) end
  end
  for j, opt in ipairs(optimizers) do
    if opt:_gathers_state() then out.optimizers[j] = opt:state_dict() end
  end
  return out
end

return SplitCheckpoint
