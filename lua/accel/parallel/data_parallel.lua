-- Data parallel (DDP), applied by prepare_model when nothing is sharded
-- (parallel_dims.lua): every rank holds the whole model (or its tp
-- slices), starts from the weights of its replica group's first rank, and
-- the reducer averages the gradients over the group: the world, or under a
-- mesh dp x cp ("dp_cp": cp ranks hold different tokens of the same
-- sequences, and the context-parallel loss makes that average the whole
-- sequence's gradient, context_parallel.lua). The reducer synchronises at
-- every world size (alone, it only divides by the items counted).
local core = require("accel.core")
local args = require("accel.util.args")
local expert_parameters = require("accel.parallel.expert_parameters")

local dist = core.dist

local data_parallel = {}

-- Weights on the meta device (built under accel.init_empty_weights, or
-- offloaded to disk by load_checkpoint_and_dispatch, which Accelerate
-- refuses to prepare too) have no values to train or broadcast; new
-- tensors made for them here would not be the optimizer's. Sharding over
-- the world takes them on ranks other than the main process
-- (fsdp/sync_module_states.lua).
function data_parallel.refuse_meta_weights(model)
  local empty = {}
  for name, t in pairs(model:state_dict()) do
    if t.device == "meta" then empty[#empty + 1] = name end
  end
  if #empty == 0 then return end
  table.sort(empty)
  args.error(string.format("Accelerator:prepare: the model's %s on the meta device (built under "
                           .. "accel.init_empty_weights, or offloaded to disk): load its weights into memory "
                           .. "(accel.load_checkpoint_and_dispatch) or give them memory (model:to_empty) "
                           .. "before making its optimizer, or shard it (zero_stage or fsdp_plugin), which "
                           .. "gives the other ranks the main process's weights",
                           table.concat(empty, ", ", 1, math.min(#empty, 3)) .. (#empty > 3 and ", ..." or "")
                             .. (#empty > 1 and " are" or " is")))
end

-- Every rank of `group` (a mesh dim, or nil for the world) takes the
-- first rank's parameters and buffers; experts split over ep are each
-- rank's own (expert_parameters.lua).
function data_parallel.broadcast_weights(model, group)
  local broadcast = group and function(t) group:broadcast(t, 0) end or function(t) dist.broadcast(t, 0) end
  core.no_grad(function()
    for _, p in ipairs(expert_parameters.without(model, model:parameters())) do broadcast(p) end
    for _, b in ipairs(model:buffers()) do broadcast(b) end
  end)
end

-- Under a pipeline, pipeline_parallel.lua applies it to this rank's stages.
function data_parallel.applies(dims)
  return dims.sharding == nil and dims:pp() == nil
end

function data_parallel.apply(layout, dims)
  local model = layout.model
  data_parallel.refuse_meta_weights(model)
  if dims.device ~= "cpu" then model:to(dims.device) end
  local replicas = dims.mesh and dims.mesh.dp_cp
  if replicas then
    if replicas.size > 1 then data_parallel.broadcast_weights(model, replicas) end
    -- Split experts synchronise apart (expert_sync.lua).
    local params = expert_parameters.without(model, model:parameters())
    layout.sync = replicas.group:GradientReducer(params, dims.bucket_bytes)
  else
    if dims.num_processes > 1 then data_parallel.broadcast_weights(model) end
    layout.sync = dist.GradientReducer(model:parameters(), dims.bucket_bytes)
  end
end

return data_parallel
