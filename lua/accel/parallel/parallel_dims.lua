-- The Accelerator's parallel layout, as torchtitan's ParallelDims: what its
-- options and the launch ask for, resolved once when the Accelerator is
-- made -- sharded data parallel (ZeRO / FSDP: fsdp/sharding_settings.lua),
-- a device mesh (a parallelism_config: device_mesh.lua, FSDP over its
-- dp_shard: fsdp/mesh_sharding.lua) -- and prepare_model's work: each
-- parallelism below applied to a model in turn, making its ModelLayout
-- (model_layout.lua), which answers what the Accelerator, its optimizer
-- and its checkpoints ask about that model. Tensor, sequence and context
-- parallelism are applied by the recipe before prepare (tensor_parallel.lua,
-- context_parallel.lua, over acc.mesh); prepare finds their slices on the
-- model (tp_parameters.lua).
local core = require("accel.core")
local args = require("accel.util.args")
local DeviceMesh = require("accel.parallel.device_mesh")
local ParallelismConfig = require("accel.parallel.parallelism_config")
local ModelLayout = require("accel.parallel.model_layout")
local sharding_settings = require("accel.parallel.fsdp.sharding_settings")
local mesh_sharding = require("accel.parallel.fsdp.mesh_sharding")
local tp_parameters = require("accel.parallel.tp_parameters")
local optimizer_names = require("accel.parallel.checkpoint.optimizer_names")

local ParallelDims = {}
ParallelDims.__index = ParallelDims

-- What prepare_model applies to a model, in order: each is
-- {applies = function(dims) -> bool, apply = function(layout, dims, optimizer)},
-- and sets what its ModelLayout holds (model_layout.lua). Pipeline
-- parallelism replaces the model by this rank's stages and applies data
-- parallel to them itself, or under dp_shard_size > 1 leaves them to
-- fully_shard (FSDP on each stage); it is loaded only for a pipeline (the heap:
-- lua/accel/init.lua). Expert parallelism comes last: it wraps the
-- synchronisation data parallel or FSDP made for the other parameters.
local PARALLELISMS = {
  { applies = function(dims) return dims:pp() ~= nil end,
    apply = function(...) return require("accel.parallel.pipeline.pipeline_parallel").apply(...) end },
  require("accel.parallel.data_parallel"),
  require("accel.parallel.fsdp.fully_shard"),
  { applies = function(dims) return dims:ep() ~= nil end,
    apply = function(...) return require("accel.parallel.expert_sync").apply(...) end },
}

-- options: zero_stage, fsdp_plugin, deepspeed_plugin, parallelism_config (each nil when not
-- given), and the Accelerator's world, device, num_processes and
-- bucket_bytes. `sharding` is nil for plain data parallel, else what is
-- sharded and how; `mesh` nil without a parallelism_config (the recipe's,
-- else the launch's sizes, --parallelism-config-*).
function ParallelDims.new(options)
  local where = "accel.Accelerator"
  local sharding = sharding_settings.resolve(where, options.zero_stage, options.fsdp_plugin, options.deepspeed_plugin)
  local dims = setmetatable({
    world = options.world, device = options.device, num_processes = options.num_processes,
    bucket_bytes = options.bucket_bytes,
    sharding = sharding,
    -- The distributed_type Accelerate reports, or nil for the process's own.
    distributed_type = sharding and sharding.name,
    -- What save_state writes: "FULL_STATE_DICT" or "SHARDED_STATE_DICT".
    state_dict_type = sharding and sharding.state_dict_type or "FULL_STATE_DICT",
  }, ParallelDims)
  local config = options.parallelism_config or ParallelismConfig.from_launch()
  if config then
    if config.pp_size > 1 then
      -- Before any size is checked against the world: what a pipeline does
      -- not combine with yet is refused as such.
      require("accel.parallel.pipeline.pipeline_parallel").check(config, sharding)
    end
    dims.mesh = DeviceMesh.new(config)  -- the engine checks the sizes against the world
    if sharding and sharding.name ~= "FSDP" then
      args.error(string.format("accel.Accelerator: zero_stage (DeepSpeed) together with a parallelism_config is not "
                               .. "implemented yet (%s; docs/api/parallelism.md)", tostring(config)))
    end
    -- FSDP over dp_shard when dp_shard_size > 1; an fsdp_plugin over a
    -- dp_shard of 1 shards nothing, and only its state_dict_type counts
    -- (as in Accelerate: the plugin's, FULL_STATE_DICT without one).
    dims.sharding = mesh_sharding.settings(config, sharding, options.fsdp_plugin)
    if dims.sharding then dims.distributed_type = dims.sharding.name end
    if dims.sharding and dims.sharding.state_dict_type == "SHARDED_STATE_DICT" then
      dims.state_dict_type = "SHARDED_STATE_DICT"
    end
  end
  return dims
end

-- The rank and size of the group whose ranks see different data: the
-- world, or under a mesh its dp dim (the ranks of a tp or cp group share
-- their batches).
function ParallelDims:data_parallel()
  if self.mesh then return self.mesh.dp.rank, self.mesh.dp.size end
  return self.world.rank, self.num_processes
end

-- Whether acc:build_model builds the model empty on ranks other than the
-- main process (fsdp/sharding_settings.lua: empty_init).
function ParallelDims:builds_empty()
  return self.sharding ~= nil and self.sharding.empty_init
end

-- The pp dim of the mesh, or nil without pipeline parallelism.
function ParallelDims:pp()
  local pp = self.mesh and self.mesh.pp
  return pp and pp.size > 1 and pp or nil
end

-- Refuses `action` (an Accelerator method's name) under a pipeline, where
-- it is not built yet.
function ParallelDims:refuse_under_pipeline(action)
  if self:pp() then require("accel.parallel.pipeline.pipeline_parallel").refuse(self, action) end
end

-- Refuses `action` under a pipeline with experts split over ep (PP x
-- EP), where it is not built yet.
function ParallelDims:refuse_under_pipeline_experts(action)
  if self:pp() and self:ep() then
    require("accel.parallel.pipeline.pipeline_parallel").refuse_with_experts(self, action)
  end
end

-- The ep dim of the mesh, or nil without expert parallelism.
function ParallelDims:ep()
  local ep = self.mesh and self.mesh.ep
  return ep and ep.size > 1 and ep or nil
end

-- Refuses `action` under ep, where it is not built yet; `instead` says
-- what is.
function ParallelDims:refuse_under_experts(action, instead)
  if not self:ep() then return end
  args.error(string.format("Accelerator: %s under ep_size = %d is not implemented yet (%s; docs/api/parallelism.md); "
                           .. "%s", action, self.mesh.ep.size, tostring(self.mesh.config), instead))
end

-- The tp dim of the mesh, or nil without tensor parallelism.
function ParallelDims:tp()
  local tp = self.mesh and self.mesh.tp
  return tp and tp.size > 1 and tp or nil
end

-- How many ranks a sharded model's flat parameters are cut over: the
-- world, or under a mesh its dp_shard x cp group (each tp rank shards its
-- own slices, each dp_replicate rank holds a replica of a shard).
function ParallelDims:shard_count()
  return self.mesh and self.mesh.dp_shard_cp.size or self.num_processes
end

-- This rank's place among the ranks its flat shards are cut over.
function ParallelDims:shard_rank()
  return self.mesh and self.mesh.dp_shard_cp.rank or self.world.rank
end

-- prepare_model: `model` with every parallelism that applies, as a
-- ModelLayout; `optimizer` is the engine optimizer holding its parameters.
function ParallelDims:prepare(model, optimizer)
  local layout = ModelLayout.new(self, model)
  -- A checkpoint of experts keys the optimizer's state by parameter name
  -- (checkpoint/expert_checkpoint.lua): the names of a sharded optimizer's
  -- indices are taken before its parameters become shards.
  if optimizer and self.sharding then
    layout.original_optimizer = { optimizer = optimizer, layout = optimizer_names(optimizer, { model }) }
  end
  for _, parallelism in ipairs(PARALLELISMS) do
    if parallelism.applies(self) then parallelism.apply(layout, self, optimizer) end
  end
  return layout
end

-- At ZeRO stages 2 and 3 no rank holds the full gradients: clipping acts
-- on the sharded model's slices, with the norm over all ranks' (as FSDP's
-- model.clip_grad_norm_, which Accelerate calls whatever parameters it is
-- given). One sharded model at a time.
local function slice_holder(layouts)
  local found
  for _, layout in ipairs(layouts) do
    if layout:reduces_every_backward() then
      if found then
        args.error("Accelerator:clip_grad_norm: clipping covers one model at ZeRO stages 2 and 3; "
                   .. "this Accelerator has prepared several")
      end
      found = layout.sharded
    end
  end
  return found
end

-- Clipping of the prepared models' gradients (`layouts`) to the global
-- norm; returns the norm. Under tensor parallelism the norm is the
-- prepared models' (whatever `params` lists): split gradients' squares are
-- summed over the tp group (tp_parameters.lua).
function ParallelDims:clip_grad_norm(layouts, params, max_norm, norm_type)
  -- A pipeline's norm spans its stages, FSDP's and TP's slices of each
  -- among them, and their experts split over ep.
  local pp = self:pp()
  if pp then
    return require("accel.parallel.pipeline.pipeline_parallel").clip_grad_norm(layouts, max_norm, norm_type, pp,
                                                                             self:tp(), self:ep())
  end
  if self:ep() then
    return require("accel.parallel.expert_sync").clip_grad_norm(layouts, max_norm, norm_type, self:tp())
  end
  local sharded = slice_holder(layouts)
  if sharded then return sharded:clip_grad_norm(max_norm, norm_type) end
  local tp = self:tp()
  if tp then
    if norm_type ~= nil and norm_type ~= 2 then
      args.error("Accelerator:clip_grad_norm: with a parallelism_config only the L2 norm (norm_type 2) is supported yet")
    end
    local models = {}
    for _, layout in ipairs(layouts) do models[#models + 1] = layout.model end
    return tp_parameters.clip_grad_norm(models, max_norm, tp)
  end
  return core.clip_grad_norm(params, max_norm, norm_type)
end

function ParallelDims:clip_grad_value(layouts, params, value)
  local sharded = slice_holder(layouts)
  if sharded then return sharded:clip_grad_value(value) end
  core.clip_grad_value(params, value)
end

-- Why CUDA graphs cannot capture this layout's steps, or nil.
function ParallelDims:capture_refusal()
  if self.sharding then return "sharded models gather and release parameters on the host" end
  if self:pp() then return "a pipeline's schedule runs its transfers and micro-batches from the host" end
end

return ParallelDims
