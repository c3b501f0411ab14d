-- Sharded data parallel (ZeRO stages 1 to 3, FSDP), applied by
-- prepare_model when the Accelerator shards (parallel_dims.lua): the model
-- is cut into flat shards over the world, or under a mesh over its
-- dp_shard x cp group (mesh_sharding.lua; a pipeline's stages over the
-- dp_shard group holding them, pipeline/pipeline_fsdp.lua), and its
-- optimizer is pointed at the shards (shard_model.lua). The sharded model
-- is also the model's gradient synchronisation; experts split over ep may
-- be a second one (fsdp/expert_sharding.lua), which expert_sync.lua drives.
local args = require("accel.util.args")
local data_parallel = require("accel.parallel.data_parallel")
local sync_module_states = require("accel.parallel.fsdp.sync_module_states")
local shard_model = require("accel.parallel.fsdp.shard_model")
local mesh_sharding = require("accel.parallel.fsdp.mesh_sharding")
local four_bit_storage = require("accel.parallel.fsdp.four_bit_storage")

local fully_shard = {}

function fully_shard.applies(dims)
  return dims.sharding ~= nil
end

-- `optimizer`: the engine optimizer holding the model's parameters.
function fully_shard.apply(layout, dims, optimizer)
  local model, sharding = layout.model, dims.sharding
  if not optimizer then
    args.error("Accelerator:prepare: with zero_stage or fsdp_plugin, prepare each model together with its "
               .. "optimizer (one prepare call), so that the optimizer steps the model's shards")
  end
  local sharded, names
  if dims.mesh then
    data_parallel.refuse_meta_weights(model)
    sharded, names, layout.expert_sharding = mesh_sharding.shard_model(dims.mesh, model, optimizer, sharding,
                                                                       dims.bucket_bytes, dims.device)
  else
    -- Every rank takes the main process's weights, so the others may have
    -- built the model on the meta device (sync_module_states.lua).
    sync_module_states.check(dims.world, model, "Accelerator:prepare")
    sync_module_states.sync_buffers(model, dims.device, dims.num_processes)
    sharded, names = shard_model(model, optimizer, sharding, dims.bucket_bytes, dims.device)
  end
  -- At stage 3 a 4-bit base is sharded as the parameters are.
  if sharding.stage == 3 then four_bit_storage.shard(model, dims) end
  layout.sharded, layout.param_names, layout.optimizer, layout.sync = sharded, names, optimizer, sharded
end

return fully_shard
