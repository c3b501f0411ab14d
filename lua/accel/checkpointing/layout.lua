-- What an Accelerator's checkpoint folder holds (checkpointing.lua lists
-- it): the files' names, the counts of each kind of object, the order in
-- which a model's tensors and gradients are written, and where automatic
-- checkpoints go.
local core = require("accel.core")

local ck = core.formats

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
  experts = function(i, rank) return layout.indexed("model", i) .. "_experts_rank_" .. rank .. ".safetensors" end,
  optimizer_experts = function(j, rank)
    return layout.indexed("optimizer", j) .. "_experts_rank_" .. rank .. ".safetensors"
  end,
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
layout.ordered_state = require("accel.util.named_tensors")

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

return layout
