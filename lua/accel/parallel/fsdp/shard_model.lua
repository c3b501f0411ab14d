-- Shards a prepared model and points its optimizer at the shards
-- (engine/parallel/sharded_model.h holds the mechanics). At stage 3 each
-- unit's forward is wrapped: the unit is gathered before it and released
-- after it (the root stays gathered through backward when autograd records).
-- The units are the wrap policy's (wrap_policy.lua, the root first), or
-- those a model cut into a pipeline's stages gives (its shard_units:
-- pipeline/pipeline_fsdp.lua), or those the caller gives (experts sharded
-- over their own group: expert_sharding.lua), among which `root` marks the
-- one whose outputs are the model's, if any.
local core = require("accel.core")
local tensor_tree = require("accel.util.tensor_tree")
local wrap_policy = require("accel.parallel.fsdp.wrap_policy")

local dist = core.dist

-- `precision`: the plugin's MixedPrecisionPolicy, or nil; it casts every
-- unit's inputs, as FSDP2 casts those of each sharded module, and the
-- root's outputs (the model's; docs/api/sharding.md, "Mixed precision").
local function wrap_forward(sharded, module, unit, is_root, precision)
  local forward = module.forward
  rawset(module, "forward", function(m, ...)
    sharded:before_forward(unit)
    local inputs, n_inputs = { ... }, select("#", ...)
    if precision then precision:cast_inputs(inputs, n_inputs) end
    local results = { forward(m, unpack(inputs, 1, n_inputs)) }
    local n = table.maxn(results)
    if precision and is_root then precision:cast_outputs(results, n) end
    -- The tensors among the results, for the hooks that gather the unit
    -- again when backward reaches it.
    local outputs = {}
    for i = 1, n do tensor_tree.each(results[i], function(t) outputs[#outputs + 1] = t end) end
    sharded:after_forward(unit, outputs, is_root and core.is_grad_enabled())
    return unpack(results, 1, n)
  end)
end

-- A meta parameter given to the engine is a new tensor over its flat
-- buffer now: the model's fields take it (a parameter shared by several
-- modules stays shared).
local function take_replacements(model, given, now)
  local replacement, any = {}, false
  for i, list in ipairs(given) do
    for j, p in ipairs(list) do
      if p.device == "meta" then replacement[p], any = now[i][j], true end
    end
  end
  if not any then return end
  for _, m in ipairs(model:modules()) do
    for _, key in ipairs(m._fields) do
      local new = replacement[rawget(m, key)]
      if new then rawset(m, key, new) end
    end
  end
end

-- Returns the ShardedModel of `model` at settings.stage, and each unit's
-- parameter names (for sharded checkpoints, flat_shards.lua); `optimizer`
-- is the engine optimizer holding the model's parameters. Every rank's
-- parameters take the main process's values (sync_module_states.lua); the flat
-- buffers are made on `device`. On a device mesh, `mesh_groups` is
-- {shard = group, replicate = group, tp = group, tp_split = {p, ...}}: the
-- shards span the shard group's ranks (whose first rank's values every
-- member takes), not the world (MeshGroups in engine/parallel/sharded_model.h).
-- `chosen` (or nil): {excluded = a set of parameters that stays out of the
-- flat buffers (the optimizer steps those parameters themselves, or another
-- sharded model shards them)} or {units = the units, {{module, params}, ...}
-- as wrap_policy.lua's, which hold only the parameters this model shards}.
return function(model, optimizer, settings, bucket_bytes, device, mesh_groups, chosen)
  local units
  local excluded = chosen and chosen.excluded
  if chosen and chosen.units then
    units = chosen.units
  elseif settings.stage == 3 and model.shard_units then
    units = model:shard_units(settings.policy)
  elseif settings.stage == 3 then
    units = wrap_policy.units(model, settings.policy)
    units[1].root = true
  else
    units = { { module = model, params = model:parameters() } }
  end
  if excluded and next(excluded) then
    for _, unit in ipairs(units) do
      local kept = {}
      for _, p in ipairs(unit.params) do
        if not excluded[p] then kept[#kept + 1] = p end
      end
      unit.params = kept
    end
  end
  local name_of = {}
  for name, p in model:named_parameters() do name_of[p] = name end
  local lists, names = {}, {}
  for i, unit in ipairs(units) do
    lists[i], names[i] = unit.params, {}
    for j, p in ipairs(unit.params) do names[i][j] = name_of[p] end
  end
  local precision = settings.mixed_precision
  local sharded = dist.ShardedModel(settings.stage, lists, optimizer, bucket_bytes, device, mesh_groups,
                                    precision and precision:engine_policy())
  take_replacements(model, lists, sharded:unit_parameters())
  -- CPU offload (cpu_offload.lua): the shards move to the host before the optimizer takes them.
  if settings.cpu_offload then sharded:offload_to_host(settings.cpu_offload.pin_memory) end
  sharded:shard_optimizer(optimizer)
  -- The model's full parameters were freed as they were sharded: their
  -- memory goes back to the system rather than staying in the training peak.
  core.release_pooled_blocks()
  if settings.stage == 3 then
    for i, unit in ipairs(units) do wrap_forward(sharded, unit.module, i, unit.root == true, precision) end
  end
  return sharded, names
end
