-- One prepared model's layout (parallel_dims.lua makes it in prepare_model):
-- how its gradients synchronise, which tensors hold them, its full
-- weights, its optimizer's hooks and its part of a checkpoint. Whatever
-- the parallelisms applied (data_parallel.lua, fsdp/fully_shard.lua, and
-- tensor, sequence or context parallelism before prepare), the
-- Accelerator asks this object and never tests the layout itself.
--   layout.model          the recipe's model
--   layout.sync           its gradient synchronisation, a data-parallel
--                         reducer or the sharded model, driven alike
--                         (engine/parallel/gradient_sync.h)
--   layout.sharded        the ShardedModel (ZeRO / FSDP), or nil
--   layout.optimizer      the engine optimizer stepping its shards, or nil
--   layout.param_names    each shard unit's parameter names (sharded)
--   layout.no_sync, layout.sync_next_backward
--                         the switches of gradient accumulation
--                         (accelerator_gradients.lua)
--   layout.unwrapped_forward
--                         the forward before autocast wrapped it
--   layout.pipelined      true when `model` is this rank's stages of a
--                         pipeline (pipeline/pipeline_parallel.lua), which
--                         replaced the recipe's model
--   layout.expert_sync    the synchronisation of experts split over ep
--                         (expert_sync.lua), which is also layout.sync, or nil
--   layout.expert_sharding
--                         the experts' own sharded model when FSDP shards
--                         them too (fsdp/expert_sharding.lua), or nil
--   layout.after_sync     nil, or what runs once the gradients are
--                         synchronised on a step that synchronises (a
--                         pipeline's tied weights summed over their stages)
--   layout.original_optimizer
--                         {optimizer, layout = checkpoint/optimizer_names.lua's}
--                         for the optimizer prepared with a sharded model:
--                         its parameters' names before sharding
local tp_parameters = require("accel.parallel.tp_parameters")
local tp_slices = require("accel.parallel.checkpoint.tp_slices")
local four_bit_storage = require("accel.parallel.fsdp.four_bit_storage")
local expert_parameters = require("accel.parallel.expert_parameters")

local ModelLayout = {}
ModelLayout.__index = ModelLayout

function ModelLayout.new(dims, model)
  return setmetatable({ dims = dims, model = model, no_sync = false }, ModelLayout)
end

-- The sharded models: the other parameters' and the experts', or none.
local function sharded_models(self)
  return { self.sharded, self.expert_sharding and self.expert_sharding.sharded }
end

-- Whether gradients are reduced on every backward, into this rank's
-- slices (ZeRO stages 2 and 3, sharded_model.h), rather than on sync steps.
function ModelLayout:reduces_every_backward()
  return self.sharded ~= nil and self.sharded:holds_gradient_slices()
end

-- Whether ranks hold different parts of the gradients (slices of a
-- sharded model, tp slices, or a pipeline's stages), so that an fp16
-- overflow in one rank's must skip the step on all.
function ModelLayout:splits_gradients()
  if self.expert_sync then return true end
  if self.sharded then return self:reduces_every_backward() and self.dims.num_processes > 1 end
  return self.dims:tp() ~= nil or self.pipelined == true
end

-- Where the gradients are: the model's parameters, or at ZeRO stages 2 and
-- 3 the shards, whose gradients are this rank's slices.
function ModelLayout:gradient_holders()
  if not self:reduces_every_backward() then return self.model:parameters() end
  local holders = self.sharded:shards()
  -- Split experts stay out of the flat buffers: their gradients are their
  -- own, or their own sharded model's slices.
  if self.expert_sync then
    for _, p in ipairs(self.expert_sync.params) do holders[#holders + 1] = p end
  end
  return holders
end

-- The same by name, as checkpoints save accumulated gradients: the
-- parameters', or this rank's slices of the flat buffers ("flat_<k>"),
-- into which every backward reduces (already summed over the ranks), and
-- the split experts, which stay out of them (by name; sharded, this rank's
-- slices of theirs, "expert_flat_<k>").
function ModelLayout:named_gradient_holders()
  local holders = {}
  if self:reduces_every_backward() then
    for k, shard in ipairs(self.sharded:shards()) do holders["flat_" .. k] = shard end
    if self.expert_sharding then
      for k, shard in ipairs(self.expert_sharding:shards()) do holders["expert_flat_" .. k] = shard end
    elseif self.expert_sync then
      local experts = expert_parameters.set(self.model)
      for name, p in self.model:named_parameters() do
        if experts[p] then holders[name] = p end
      end
    end
  else
    for name, p in self.model:named_parameters() do holders[name] = p end
  end
  return holders
end

-- Runs fn() with the full parameters in place: at ZeRO stage 3 every rank
-- gathers them for the call (a collective: call it on every rank), sharded
-- experts too. With `written`, fn wrote them and the shards take what it wrote.
function ModelLayout:with_full_parameters(fn, written)
  local sharded, all = self.sharded, sharded_models(self)
  if sharded then
    -- A 4-bit base sharded with them is whole for the call too.
    local inner = fn
    fn = function() return four_bit_storage.with_whole(self.model, inner) end
    for _, s in ipairs(all) do s:gather_all() end
  end
  local results = { pcall(fn) }
  for _, s in ipairs(all) do
    if written and results[1] then s:keep_written_parameters() end
    s:release_all()
  end
  if not results[1] then error(results[2], 0) end
  return unpack(results, 2, table.maxn(results))
end

-- The unsplit model's parameters and buffers by name, copied: gathered at
-- ZeRO stage 3, then over tp. A collective.
function ModelLayout:full_state_dict()
  local tp = self.dims:tp()
  return self:with_full_parameters(function()
    local out = {}
    local state = tp and tp_parameters.full_state_dict(self.model, tp) or self.model:state_dict()
    for name, t in pairs(state) do out[name] = tp and t:detach():clone() or t:clone() end
    return self.expert_sync and expert_parameters.gather(self.model, out) or out
  end)
end

-- save_model's weights: fn(full, ordered) with the model's full parameters
-- in place; `full` is the full weights by name under a mesh (gathered over
-- dp_shard, then over tp, and the experts over ep), nil where the model's
-- own are whole; `ordered` the order they are written in when the model's
-- own names are not all of them (split experts), else nil.
function ModelLayout:with_full_weights(fn)
  local mesh = self.dims.mesh
  if mesh then
    local full = self:with_full_parameters(function()
      local out = {}
      for name, t in pairs(tp_parameters.full_state_dict(self.model, mesh.tp)) do out[name] = t:detach():clone() end
      return self.expert_sync and expert_parameters.gather(self.model, out) or out
    end)
    return fn(full, self.expert_sync and expert_parameters.ordered(self.model, full) or nil)
  end
  return self:with_full_parameters(function() return fn(nil) end)
end

-- load_model's weights: fn(fit) with the full parameters in place, which
-- fn writes; under a mesh `fit(weights, path)` makes full weights this
-- rank's (its tp slices; the shards then keep their part).
function ModelLayout:load_full_weights(fn)
  local mesh = self.dims.mesh
  local fit = mesh and function(weights, path)
    -- The experts this rank holds of the full weights' (expert_parameters.lua).
    if self.expert_sync then weights = expert_parameters.local_part(self.model, weights) end
    return tp_slices.slice("model", weights, tp_slices.splits({ self.model }, {}).models[1], mesh.tp, path)
  end
  self:with_full_parameters(function() fn(fit) end, true)
end

-- The optimizer's hooks (accelerated_optimizer.lua), for the engine
-- optimizer `optimizer`: this layout when it steps the model's shards
-- (their gradient slices taken before the step, the updated shards
-- gathered into every rank's parameters after it), else nil.
-- Split experts (expert_sync.lua) add their check that their gradients
-- synchronised to every optimizer's step.
function ModelLayout:optimizer_hooks(optimizer)
  if (self.sharded and self.optimizer == optimizer) or self.expert_sync then return self end
end

function ModelLayout:before_step()
  if self.expert_sync then self.expert_sync:check_synchronised() end
  for _, s in ipairs(sharded_models(self)) do s:before_step() end
end
function ModelLayout:after_step()
  for _, s in ipairs(sharded_models(self)) do s:after_step() end
end
function ModelLayout:zero_grad(set_to_none)
  if self.expert_sync then self.expert_sync:zero_grad() end
  for _, s in ipairs(sharded_models(self)) do s:zero_grad(set_to_none) end
end

-- The optimizer's state in its layout before sharding, as plain data
-- parallel saves it (a collective when this model's shards are its), and
-- the reverse. Under ep it holds this rank's experts under this rank's
-- indices, which checkpoints key by name (checkpoint/expert_checkpoint.lua);
-- sharded experts' state is put together with the others' by their
-- sharding (fsdp/expert_sharding.lua).
function ModelLayout:optimizer_state_dict(optimizer)
  if self.sharded and self.optimizer == optimizer then
    if self.expert_sharding then
      return self.expert_sharding:full_optimizer_state(self.sharded, optimizer, self.original_optimizer.layout)
    end
    return self.sharded:full_optimizer_state(optimizer)
  end
  return optimizer:state_dict()
end

function ModelLayout:load_optimizer_state_dict(optimizer, state)
  if self.sharded and self.optimizer == optimizer then
    if self.expert_sharding then
      return self.expert_sharding:load_full_optimizer_state(self.sharded, optimizer, state,
                                                            self.original_optimizer.layout)
    end
    return self.sharded:load_full_optimizer_state(optimizer, state)
  end
  optimizer:load_state_dict(state)
end

-- A recipe's own call for the optimizer's state (`action`) under ep,
-- which would hold this rank's experts under this rank's indices: refused.
function ModelLayout:refuse_optimizer_state(action)
  self.dims:refuse_under_experts(action, "save_state and load_state keep it, by parameter name")
end

return ModelLayout
