-- What the Accelerator does differently when given a parallelism_config:
-- it makes acc.mesh, and a prepared model is broadcast, gradient-averaged
-- and fed data over the mesh's data-parallel dim ("dp") only, since the
-- ranks of a tp group hold different slices of it and see the same data.
local core = require("accel.core")
local args = require("accel.args")
local DeviceMesh = require("accel.parallel.device_mesh")
local tp_parameters = require("accel.parallel.tp_parameters")

local accelerator_mesh = {}

-- The mesh for `config`, refusing what this version cannot train yet.
function accelerator_mesh.make(config, sharding)
  local mesh = DeviceMesh.new(config)  -- the engine checks the sizes against the world
  local function refuse(what)
    args.error(string.format("accel.Accelerator: %s is not implemented yet (%s; docs/api/parallelism.md)", what,
                             tostring(config)))
  end
  if config.cp_size > 1 then refuse("context parallelism (cp_size > 1)") end
  if config.dp_shard_size > 1 then refuse("sharding over dp_shard (dp_shard_size > 1, FSDP on the mesh)") end
  if sharding then refuse("zero_stage or fsdp_plugin together with a parallelism_config") end
  return mesh
end

-- Every rank of a dp group starts from the weights of the group's first
-- rank (tp ranks keep their own slices); gradients average over dp.
function accelerator_mesh.prepare_model(mesh, model, bucket_bytes)
  if mesh.dp.size > 1 then
    core.no_grad(function()
      for _, p in ipairs(model:parameters()) do mesh.dp:broadcast(p, 0) end
      for _, b in ipairs(model:buffers()) do mesh.dp:broadcast(b, 0) end
    end)
  end
  return mesh.dp.group:GradientReducer(model:parameters(), bucket_bytes)
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

-- Checkpoints of split models are not written yet: writing this rank's
-- slices as if they were the model would make files that load wrong.
function accelerator_mesh.refuse_checkpoint(mesh, where)
  if mesh and mesh.tp.size > 1 then
    args.error(where .. ": checkpoints under tensor parallelism (tp_size > 1) are not implemented yet; "
               .. "acc:get_state_dict(model) gives the full weights (docs/api/parallelism.md)")
  end
end

return accelerator_mesh
