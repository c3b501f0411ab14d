-- FSDP on a device mesh (docs/api/parallelism.md, "FSDP over dp_shard, HSDP,
-- TP x FSDP"): with a parallelism_config, dp_shard_size > 1 means FULL_SHARD
-- over the mesh's dp_shard dim, as in Accelerate and torchtitan. The shards
-- span a dp_shard group, not the world; dp_replicate holds replicas of them
-- (HSDP: the gradient slices are averaged over it once per step); a model
-- made tensor parallel first keeps its tp slices, which FSDP then shards (as
-- torchtitan applies TP, then FSDP). The engine's ShardedModel does the work
-- over those groups (MeshGroups in engine/parallel/sharded_model.h).
-- Experts split over ep are sharded apart, over the ranks of dp_shard x cp
-- holding the same ones (expert_sharding.lua), or stay whole.
--
-- With context parallelism the cp ranks join the shard group, as in
-- torchtitan: the shards span dp_shard x cp flattened (mesh.dp_shard_cp), so
-- a rank keeps 1/(dp_shard x cp) of the model. The ranks of a cp group hold
-- the same weights and different tokens of the same rows, so their
-- gradients are summed like those of different rows: the reduce-scatter
-- over the shard group averages over dp_shard x cp (the engine's divisor is
-- the shard group's size times dp_replicate's, dp x cp, as the
-- context-parallel loss needs: context_parallel.lua), and the gradient norm
-- sums the slices over it. With dp_shard_size 1 nothing is sharded, cp or
-- not (torchtitan would shard over cp alone): the gradients are averaged
-- over dp x cp as plain data parallel (data_parallel.lua).
local args = require("accel.util.args")
local sharding_settings = require("accel.parallel.fsdp.sharding_settings")
local FullyShardedDataParallelPlugin = require("accel.parallel.fsdp.fsdp_plugin")
local shard_model = require("accel.parallel.fsdp.shard_model")
local tp_parameters = require("accel.parallel.tp_parameters")
local data_parallel = require("accel.parallel.data_parallel")
local expert_parameters = require("accel.parallel.expert_parameters")
local ExpertSharding = require("accel.parallel.fsdp.expert_sharding")

local mesh_sharding = {}

local where = "accel.Accelerator"

-- What the Accelerator shards under `config`, given what its fsdp_plugin
-- (`plugin`, or nil) and parallel/fsdp/sharding_settings.lua's resolution of it and of
-- the launch (`sharding`) asked for: nil when dp_shard_size is 1 (an
-- fsdp_plugin then only says how checkpoints are written,
-- parallel_dims.lua), else FULL_SHARD over dp_shard with the plugin's
-- wrap policy, or the launch's (--use-fsdp and its options), or NO_WRAP.
-- zero_stage with a parallelism_config is refused by parallel_dims.lua.
function mesh_sharding.settings(config, sharding, plugin)
  if config.dp_shard_size == 1 then return nil end
  local function refuse(what)
    args.error(string.format("%s: %s with dp_shard_size > 1 is not implemented (%s); dp_shard_size > 1 means "
                             .. "FSDP FULL_SHARD over dp_shard (docs/api/parallelism.md)", where, what,
                             tostring(config)))
  end
  sharding = sharding or (not plugin and sharding_settings.resolve(where, nil, FullyShardedDataParallelPlugin{}))
  if not sharding or sharding.stage ~= 3 then
    local strategy = plugin and plugin.sharding_strategy or "SHARD_GRAD_OP"
    refuse("the fsdp_plugin's sharding_strategy " .. strategy)
  end
  if sharding.empty_init then
    refuse("building the model empty on all ranks but the main process (cpu_ram_efficient_loading)")
  end
  return sharding
end

-- Shards `model` (its optimizer `optimizer`) over mesh.dp_shard_cp
-- (dp_shard without context parallelism), as parallel/fsdp/shard_model.lua does
-- over the world. Every rank of a dp x cp group starts from the group's
-- first rank's weights and buffers (a tp rank keeps its own slices); the
-- parameters split over tp are told to the engine, for the gradient norm.
-- Returns the ShardedModel and its parameter names, and the experts'
-- sharding (expert_sharding.lua) or nil.
function mesh_sharding.shard_model(mesh, model, optimizer, settings, bucket_bytes, device)
  if device ~= "cpu" then model:to(device) end
  if mesh.dp_cp.size > 1 then data_parallel.broadcast_weights(model, mesh.dp_cp) end
  -- Experts split over ep stay out of these flat buffers: each rank holds
  -- other experts. Under dp_shard x cp > ep_size they are sharded over the
  -- ranks holding the same ones, first (expert_sharding.lua); else they
  -- stay whole (expert_sync.lua synchronises them).
  local experts = ExpertSharding.applies(mesh, model)
                  and ExpertSharding.new(mesh, model, optimizer, settings, bucket_bytes, device) or nil
  local split = {}
  for _, entry in ipairs(tp_parameters.list(model)) do
    if entry[3] then split[#split + 1] = entry[2] end
  end
  local sharded, names = shard_model(model, optimizer, settings, bucket_bytes, device, {
    shard = mesh.dp_shard_cp.group, replicate = mesh.dp_replicate.group, tp = mesh.tp.group, tp_split = split,
  }, { excluded = expert_parameters.set(model) })
  return sharded, names, experts
end

return mesh_sharding
