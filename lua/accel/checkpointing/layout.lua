-- What an Accelerator's checkpoint folder holds (checkpointing.lua lists
-- it): the files' names, the counts of each kind of object, the order in
-- which a model's tensors and gradients are written, and where automatic
-- checkpoints go.
local core = require("accel.core")
local sharded_state = require("accel.sharding.sharded_state")
local mesh_checkpoint = require("accel.parallel.mesh_checkpoint")

local ck = core.checkpoint

local layout = {}

-- base, base_1, base_2 ... for the first, second, third object of a kind.
function layout.indexed(base, i)
  return i == 1 and base or (base .. "_" .. (i - 1))
end

layout.names = {
  model = function(i) return layout.indexed("model", i) .. ".safetensors" end,
  optimizer = function(i) return layout.indexed("optimizer", i) .. ".safetensors" end,
  scheduler = function(i) return layout.indexed("scheduler", i) .. ".lua" end,
  custom = function(i) return "custom_checkpoint_" .. (i - 1) .. ".lua" end,
  rng = function(rank) return "rng_" .. rank .. ".safetensors" end,
  dataloader = function(i, rank) return layout.indexed("dataloader", i) .. "_rank_" .. rank .. ".lua" end,
  gradients = function(i, rank) return layout.indexed("gradients", i) .. "_rank_" .. rank .. ".safetensors" end,
  model_slices = function(i, rank) return layout.indexed("model", i) .. "_rank_" .. rank .. ".safetensors" end,
  optimizer_slices = function(j, rank) return layout.indexed("optimizer", j) .. "_rank_" .. rank .. ".safetensors" end,
  sharding = function(i) return layout.indexed("model", i) .. "_sharding.lua" end,
  mesh = "mesh_layout.lua",
  scaler = "scaler.lua",
  accelerator = "accelerator_state.lua",
}

function layout.sorted_pairs(map)
  local keys = {}
  for k in pairs(map) do keys[#keys + 1] = k end
  table.sort(keys)
  local out = {}
  for i, k in ipairs(keys) do out[i] = { k, map[k] } end
  return out
end

-- Parameters then buffers, each in definition order, as save_model writes them.
function layout.ordered_state(model)
  local out = {}
  for name, p in model:named_parameters() do out[#out + 1] = { name, p } end
  for name, b in model:named_buffers() do out[#out + 1] = { name, b } end
  return out
end

-- The largest value file saved or read (as manifests are bounded): loader
-- positions, schedulers and registered objects are small, and a load
-- refuses one listed larger before a byte of it is read.
layout.MAX_VALUE_BYTES = 256 * 2 ^ 20

function layout.counts(c)
  return {
    models = #c.models,
    optimizers = #c.optimizers,
    schedulers = #c.schedulers,
    dataloaders = #c.dataloaders,
    custom = #c.custom_objects,
  }
end

function layout.automatic(c)
  local config = c.project_configuration
  return config and config.automatic_checkpoint_naming and config or nil
end

-- {number, name} of every project_dir/checkpoints/checkpoint_<n>, oldest first.
function layout.numbered_checkpoints(config)
  local out = {}
  for _, name in ipairs(ck.list_folder(config:checkpoints_dir())) do
    local n = name:match("^checkpoint_(%d+)$")
    if n then out[#out + 1] = { tonumber(n), name } end
  end
  table.sort(out, function(a, b) return a[1] < b[1] end)
  return out
end

-- How many ranks a sharded model's flat parameters are cut over: the
-- world, or under a mesh its dp_shard x cp group (each tp rank shards its
-- own slices, each dp_replicate rank holds a replica of a shard).
function layout.shard_count(c)
  return c.mesh and c.mesh.dp_shard_cp.size or c.state.num_processes
end

-- The number, among c.optimizers, of the optimizer stepping `model`'s shards.
function layout.optimizer_of(c, model)
  local engine = c.shard_layouts[model].optimizer
  for j, opt in ipairs(c.optimizers) do
    if opt.optimizer == engine then return j end
  end
  error("the optimizer of a sharded model was not prepared with it", 0)
end

-- The flat layout of sharded model `model` (sharded_state.lua).
function layout.flat_layout(c, model)
  local info = c.shard_layouts[model]
  return sharded_state.layout(c.sharded_models[model], info.optimizer, info.param_names, layout.shard_count(c))
end

-- Under a mesh: how c's models and optimizers are split over tp
-- (mesh_checkpoint.splits), an optimizer of a sharded model by its flat
-- layout's names.
function layout.mesh_splits(c)
  local sharded = {}
  for i, model in ipairs(c.models) do
    if c.sharded_models[model] then
      sharded[layout.optimizer_of(c, model)] = { model = i, layout = layout.flat_layout(c, model) }
    end
  end
  return mesh_checkpoint.splits(c.models, c.optimizers, sharded)
end

-- name -> tensor whose .grad holds this rank's accumulated gradient: the
-- model's parameters, or at stages 2 and 3 this rank's slices of the flat
-- buffers ("flat_<k>"), into which every backward reduces (already summed
-- over the ranks); the parameters themselves have none there.
function layout.gradient_holders(c, model)
  local holders = {}
  local sharded = c.sharded_models[model]
  if sharded and sharded:holds_gradient_slices() then
    for k, shard in ipairs(sharded:shards()) do holders["flat_" .. k] = shard end
  else
    for name, p in model:named_parameters() do holders[name] = p end
  end
  return holders
end

return layout
