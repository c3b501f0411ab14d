-- Accelerator:load_state's part for split models (checkpointing/load.lua
-- reads the rest): the layouts saved with them, each rank's own files when
-- the layout in force is the one saved, else the full state from every
-- rank's files (flat shards saved without a mesh) or this rank's parts of
-- it, read one tensor at a time (reshard.lua); then the slices this rank
-- keeps of full states. `c.split` is the SplitCheckpoint
-- (split_checkpoint.lua). What is read goes into `s`, as load.lua
-- restores it: s.models[i], s.optimizers[j] (states), s.own[i] (a sharded
-- model's own files), s.own_optimizers[j], s.model_files[i] (the file
-- named in errors), s.mesh_layout.
local layout = require("accel.checkpointing.layout")
local flat_shards = require("accel.parallel.checkpoint.flat_shards")
local tp_slices = require("accel.parallel.checkpoint.tp_slices")
local reshard = require("accel.parallel.checkpoint.reshard")
local pipeline_checkpoint = require("accel.parallel.checkpoint.pipeline_checkpoint")
local expert_checkpoint = require("accel.parallel.checkpoint.expert_checkpoint")

local read_split = {}

-- A flat layout read (flat_shards.check_layout), its optimizer one of
-- the checkpoint's.
local function check_flats(c, s, flats, path)
  flat_shards.check_layout(flats, path)
  if flats.optimizer > #c.optimizers then
    error(string.format("'%s': 'optimizer' is %d but the checkpoint holds %d optimizer(s)", path, flats.optimizer,
                        #c.optimizers), 0)
  end
  return flats
end

-- A checkpoint saved under a mesh lists its layout (tp_slices.lua):
-- s.mesh_layout. With SHARDED_STATE_DICT this fills s.models and
-- s.optimizers (or s.own, for flat shards) with this rank's own files when
-- the mesh in force is the one saved on (s.mesh_own) and, for flat shards,
-- the flat layout too; anything else is read in this rank's parts, only
-- what it keeps (reshard.lua), and s.sliced says that s holds this
-- rank's parts already.
local function read_mesh_slices(c, s, listed, folder, read_value, read_tensors, open_tensors)
  if not listed[layout.names.mesh] then return end
  local path = folder .. "/" .. layout.names.mesh
  local saved = tp_slices.check_layout(read_value(layout.names.mesh), path)
  s.mesh_layout, s.mesh_layout_path = saved, path
  if saved.world_size ~= s.manifest.world_size then
    error(string.format("'%s' says world_size %d but the checkpoint was saved on %d process(es)", path,
                        saved.world_size, s.manifest.world_size), 0)
  end
  for _, part in ipairs({ { "models", #c.models }, { "optimizers", #c.optimizers } }) do
    if #saved[part[1]] ~= part[2] then
      error(string.format("'%s' lists the splits of %d %s for %d", path, #saved[part[1]], part[1], part[2]), 0)
    end
  end
  if saved.state_dict_type ~= "SHARDED_STATE_DICT" then return end
  s.mesh_own, s.sliced = tp_slices.same_mesh(saved, c.split.mesh), true
  local rank, flat_layouts, flat_optimizers = c.state.process_index, {}, {}
  for i, model in ipairs(c.models) do
    if listed[layout.names.sharding(i)] then
      local flats_path = folder .. "/" .. layout.names.sharding(i)
      local flats = check_flats(c, s, read_value(layout.names.sharding(i)), flats_path)
      local shards = saved.mesh.dp_shard * saved.mesh.cp  -- FSDP's shard group, dp_shard x cp
      if flats.world_size ~= shards then
        error(string.format("'%s' cuts flat parameters over %d rank(s) but '%s' says dp_shard %d x cp %d", flats_path,
                            flats.world_size, path, saved.mesh.dp_shard, saved.mesh.cp), 0)
      end
      local sharded, j = c.split:sharded(model), flats.optimizer
      if s.mesh_own and sharded and flat_shards.same_layout(flats, c.split:flat_layout(model)) then
        s.own[i] = { sharded = sharded, optimizer = c.split:shard_optimizer(model),
                     tensors = read_tensors(layout.names.model_slices(i, rank)),
                     optimizer_state = read_tensors(layout.names.optimizer_slices(j, rank)) }
        s.own_optimizers[j] = true
      end
      flat_layouts[i], flat_optimizers[j] = { layout = flats, path = flats_path }, true
    elseif s.mesh_own then
      s.models[i] = read_tensors(layout.names.model_slices(i, rank))
      s.model_files[i] = layout.names.model_slices(i, rank)
    end
  end
  if s.mesh_own then
    for j = 1, #c.optimizers do
      if not flat_optimizers[j] and not s.optimizers[j] then
        s.optimizers[j] = read_tensors(layout.names.optimizer_slices(j, rank))
      end
    end
  end
  reshard.read(c, s, folder, open_tensors, flat_layouts)
end

-- The full states read are sliced for the mesh in force (its tp rank's
-- share of each split tensor); s.same_mesh tells whether the checkpoint
-- was saved on the mesh in force (or both without one), so that per-rank
-- state such as accumulated gradients still fits.
function read_split.fit(c, s, folder)
  local saved = s.mesh_layout
  if s.same_mesh == nil then  -- a pipeline's read set it
    s.same_mesh = (saved == nil and c.split.mesh == nil) or (saved ~= nil and tp_slices.same_mesh(saved, c.split.mesh))
  end
  if not c.split:tp() or s.sliced then return end
  local splits = c.split:mesh_splits(c.models, c.optimizers)
  for i in pairs(s.models) do
    local path = folder .. "/" .. (s.model_files[i] or layout.names.model(i))
    s.models[i] = tp_slices.slice("model", s.models[i], splits.models[i], c.split.mesh.tp, path)
  end
  for j in pairs(s.optimizers) do
    local path = folder .. "/" .. (s.mesh_layout and layout.names.mesh or layout.names.optimizer(j))
    s.optimizers[j] = tp_slices.slice("optimizer", s.optimizers[j], splits.optimizers[j], c.split.mesh.tp, path)
  end
end

-- Flat shards saved without a mesh (model_sharding.lua layouts): this
-- rank's own files when the flat layout in force is the one saved, else
-- the full state from every rank's files.
local function read_flat_shards(c, s, listed, folder, read_value, read_tensors)
  local rank = c.state.process_index
  for i, model in ipairs(c.models) do
    if not s.models[i] and not s.own[i] and listed[layout.names.sharding(i)] then
      local layout_path = folder .. "/" .. layout.names.sharding(i)
      local saved = check_flats(c, s, read_value(layout.names.sharding(i)), layout_path)
      if saved.world_size ~= s.manifest.world_size then
        error(string.format("'%s' cuts flat parameters over %d rank(s) but the checkpoint was saved on %d "
                            .. "process(es)", layout_path, saved.world_size, s.manifest.world_size), 0)
      end
      local j = saved.optimizer
      local sharded, optimizer = c.split:sharded(model), c.split:shard_optimizer(model)
      -- Saved without a mesh: a mesh's ranks cut their flat parameters otherwise.
      local current = sharded and not c.split.mesh and c.split:flat_layout(model)
      if current and flat_shards.same_layout(saved, current) then
        s.own[i] = { sharded = sharded, optimizer = optimizer, tensors = read_tensors(layout.names.model_slices(i, rank)),
                     optimizer_state = read_tensors(layout.names.optimizer_slices(j, rank)) }
        s.own_optimizers[j] = true
      else
        local models, optimizers = {}, {}
        for r = 0, saved.world_size - 1 do
          models[r + 1] = read_tensors(layout.names.model_slices(i, r))
          optimizers[r + 1] = read_tensors(layout.names.optimizer_slices(j, r))
        end
        s.models[i] = flat_shards.full_model(saved, models, layout_path)
        s.model_files[i] = layout.names.sharding(i)
        s.optimizers[j] = flat_shards.full_optimizer(saved, optimizers, layout_path)
      end
    end
  end
end

-- Reads the split models' files into `s` (above); `files` = {value,
-- tensors, open}: a value file, a tensor file read whole, and a tensor file
-- opened to be mapped, each verified against the manifest.
function read_split.read(c, s, listed, folder, files)
  -- Experts split over ep in force, or a checkpoint of them (expert_checkpoint.lua).
  if expert_checkpoint.read(c, s, listed, folder, files) then return end
  -- A pipeline in force, or a pipeline's checkpoint (pipeline_checkpoint.lua).
  if pipeline_checkpoint.read(c, s, listed, folder, files) then return end
  read_mesh_slices(c, s, listed, folder, files.value, files.tensors, files.open)
  read_flat_shards(c, s, listed, folder, files.value, files.tensors)
end

-- Gives a sharded model, its buffers and its optimizer this rank's own
-- state (`own`, from s.own).
function read_split.restore_own(own, model)
  flat_shards.restore_own(own.sharded, model, own.optimizer, own.tensors, own.optimizer_state)
end

-- What load_state prints when the checkpoint was saved on another mesh
-- (s.same_mesh false): "<saved> ... <now>" described, or nil.
function read_split.mesh_change(c, s)
  if s.same_mesh then return nil end
  if s.mesh_description then return s.mesh_description.saved, s.mesh_description.now end
  local saved = s.mesh_layout and tp_slices.describe(s.mesh_layout.mesh) or "no mesh"
  local now = c.split.mesh and tp_slices.describe(tp_slices.sizes(c.split.mesh)) or "no mesh"
  return saved, now
end

return read_split
