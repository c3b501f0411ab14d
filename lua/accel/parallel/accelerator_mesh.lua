-- What the Accelerator does differently when given a parallelism_config:
-- it makes acc.mesh, and a prepared model is fed data over the mesh's
-- data-parallel dim ("dp") only, since the ranks of a tp group hold
-- different slices of it and see the same data (and so do the ranks of a cp
-- group, each taking its part of the sequence), and broadcast and
-- gradient-averaged over dp x cp ("dp_cp").
local core = require("accel.core")
local args = require("accel.args")
local DeviceMesh = require("accel.parallel.device_mesh")
local tp_parameters = require("accel.parallel.tp_parameters")
local mesh_checkpoint = require("accel.parallel.mesh_checkpoint")

local accelerator_mesh = {}

-- The mesh for `config`, refusing what this version cannot train yet, and
-- the state-dict type its checkpoints take: as in Accelerate, the
-- fsdp_plugin's (FULL_STATE_DICT without one). FSDP shards when
-- dp_shard_size > 1 only (over dp_shard x cp, mesh_sharding.lua), so with
-- dp_shard_size 1 an fsdp_plugin shards nothing and only its
-- state_dict_type counts.
function accelerator_mesh.make(config, sharding)
  local mesh = DeviceMesh.new(config)  -- the engine checks the sizes against the world
  if sharding and sharding.name ~= "FSDP" then
    args.error(string.format("accel.Accelerator: zero_stage (DeepSpeed) together with a parallelism_config is not "
                             .. "implemented yet (%s; docs/api/parallelism.md)", tostring(config)))
  end
  return mesh, sharding and sharding.state_dict_type or "FULL_STATE_DICT"
end

-- Every rank of a dp x cp group starts from the weights of the group's
-- first rank (tp ranks keep their own slices); gradients average over
-- dp x cp: cp ranks hold different tokens of the same sequences, and the
-- context-parallel loss makes that average the whole sequence's gradient
-- (context_parallel.lua). Without cp, dp_cp is dp.
function accelerator_mesh.prepare_model(mesh, model, bucket_bytes)
  local replicas = mesh.dp_cp
  if replicas.size > 1 then
    core.no_grad(function()
      for _, p in ipairs(model:parameters()) do replicas:broadcast(p, 0) end
      for _, b in ipairs(model:buffers()) do replicas:broadcast(b, 0) end
    end)
  end
  return replicas.group:GradientReducer(model:parameters(), bucket_bytes)
end

-- The global gradient norm of the prepared models, split parameters counted
-- over the tp group (tp_parameters.lua), and clipping to it.
function accelerator_mesh.clip_grad_norm(mesh, models, max_norm, norm_type)
  if norm_type ~= nil and norm_type ~= 2 then
    args.error("Accelerator:clip_grad_norm: with a parallelism_config only the L2 norm (norm_type 2) is supported yet")
  end
  return tp_parameters.clip_grad_norm(models, max_norm, mesh.tp)
end

-- Under tensor parallelism each rank holds slices: the state dict of the
-- unsplit model (acc:get_state_dict), gathered over tp, cloned.
function accelerator_mesh.full_state_dict(mesh, model)
  local out = {}
  for name, t in pairs(tp_parameters.full_state_dict(model, mesh.tp)) do out[name] = t:detach():clone() end
  return out
end

-- `state` (full weights by name, as save_model writes them) sliced for this
-- tp rank; `path` names the file in errors.
function accelerator_mesh.slice_state_dict(mesh, model, state, path)
  return mesh_checkpoint.slice("model", state, mesh_checkpoint.splits({ model }, {}).models[1], mesh.tp, path)
end

return accelerator_mesh
