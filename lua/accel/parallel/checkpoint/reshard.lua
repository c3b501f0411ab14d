-- Accelerator:load_state of a SHARDED_STATE_DICT checkpoint saved on a
-- device mesh and loaded elsewhere (another tp, dp_shard or cp size,
-- another wrap policy, no mesh): each rank reads only what it keeps, one
-- tensor at a time, as torch.distributed.checkpoint does, and no rank holds
-- the whole model. The files are mapped (checkpoint.open_weights), so a
-- range of a saved tensor brings in only its own pages. For each tensor of
-- the state in force (a parameter, a buffer, an optimizer slot) the saved
-- pieces holding some of this rank's part are found (tp slices by the mesh
-- layout, tp_slices.lua; flat shards by the flat layout,
-- flat_shards.lua) and only they are read. A rank holds its own share,
-- and besides it one tensor's part at a time (with flat shards, one saved
-- tp rank's slice of one parameter, assembled from its shards).
local core = require("accel.core")
local layout = require("accel.checkpointing.layout")
local tp_slices = require("accel.parallel.checkpoint.tp_slices")
local flat_shards = require("accel.parallel.checkpoint.flat_shards")
local sorted_keys = require("accel.util.sorted_keys")
local dtypes = require("accel.big_modeling.dtypes")

local reshard = {}

-- A tp group of one rank: no mesh, or tp 1.
local WHOLE = { rank = 0, size = 1 }

-- The pieces read for a tensor are garbage once its part is made, and so
-- is the part once copied into a shard; the engine paces the collector by
-- the live bytes, which here include the rank's whole share, so they are
-- collected here once they reach this many elements, or the largest
-- tensor's if more.
local COLLECT_EVERY = 2 ^ 20

-- Tensors of at least this many bytes are mapped, smaller ones read.
local MAP_FROM = 2 ^ 20

-- The checkpoint's tensor files as this load reads them: `open(name)` is
-- a file verified whole against the manifest (read through, nothing kept)
-- and open for mapping; each is opened once, when first needed.
local function tensor_files(open)
  local files, readers, garbage, largest = {}, {}, 0, COLLECT_EVERY
  local function file(name)
    local f = readers[name]
    if not f then
      local reader = open(name)
      f = { reader = reader, names = {} }
      for _, key in ipairs(reader:names()) do f.names[key] = true end
      readers[name] = f
    end
    return f
  end
  -- Counts `t`, soon garbage, and collects once enough is.
  local function made(t)
    garbage = garbage + t:numel()
    largest = math.max(largest, t:numel())
    if garbage >= largest then
      garbage = 0
      collectgarbage()
    end
    return t
  end
  files.made = made
  function files.keys(name) return sorted_keys(file(name).names) end
  -- {dtype, shape} of `key` in file `name`, or nil when it has none.
  function files.info(name, key)
    local f = file(name)
    return f.names[key] and f.reader:info(key) or nil
  end
  -- Tensor `key` of file `name`, or nil: over the file's bytes, or read
  -- when small (a mapping takes whole pages, and a warm worker keeps what
  -- it maps for its next run).
  function files.tensor(name, key)
    local f = file(name)
    if not f.names[key] then return nil end
    return made(f.reader:info(key).bytes < MAP_FROM and f.reader:load(key) or f.reader:map(key))
  end
  function files.close()
    for _, f in pairs(readers) do f.reader:close() end
    readers = {}
    collectgarbage()
  end
  return files
end

-- The mesh in force as this load cuts by it: its tp group, the split dims
-- of its models and optimizers (splits.models[i], splits.optimizers[j]),
-- and a sharded model's shard rank.
local function mesh_in_force(c)
  if not c.split.mesh then return { tp = WHOLE, splits = { models = {}, optimizers = {} }, shard = c.state.process_index } end
  return { tp = c.split.mesh.tp, splits = c.split:mesh_splits(c.models, c.optimizers), shard = c.split.mesh.dp_shard_cp.rank }
end

-- This rank's part of `key` of `source`: its tp slice when the model in
-- force splits it (`dims`, of a "model" or an "optimizer").
local function read_part(files, source, kind, dims, tp, key, path)
  local dim = tp.size > 1 and tp_slices.split_dim(kind, dims or {}, key, #source.entries[key].shape) or nil
  local t = tp_slices.part(source, key, dim, tp, path)
  files.made(t)
  return t
end

-- This rank's part of every tensor of `source`, as a state {key = tensor}.
local function own_parts(files, source, kind, dims, tp, path)
  local out = {}
  for _, key in ipairs(source.keys) do out[key] = read_part(files, source, kind, dims, tp, key, path) end
  return out
end

-- An optimizer's full state as flat_shards.own_optimizer reads it.
local function full_reader(files, source, dims, tp, path)
  return {
    keys = source.keys,
    shape = function(key) return source.entries[key].shape end,
    dtype = function(key) return source.entries[key].dtype end,
    read = function(key) return read_part(files, source, "optimizer", dims, tp, key, path) end,
  }
end

-- The names `source` and model `names` (name -> shape, true for a buffer)
-- do not share, and the shapes that differ, as Module:load_state_dict
-- words them; nil when they fit.
local function misfit(source, names, tp, dims)
  local missing, unexpected, mismatched = {}, {}, {}
  for _, name in ipairs(sorted_keys(names)) do
    if not source.entries[name] then missing[#missing + 1] = name end
  end
  for _, key in ipairs(source.keys) do
    local shape = names[key]
    if shape == nil then
      unexpected[#unexpected + 1] = key
    elseif shape ~= true then
      local full = { unpack(source.entries[key].shape) }
      local dim = dims and dims[key]
      if dim and tp.size > 1 then full[dim] = full[dim] / tp.size end
      if table.concat(full, "x") ~= table.concat(shape, "x") then
        mismatched[#mismatched + 1] = string.format("'%s' has shape [%s] in the checkpoint but [%s] in the model", key,
                                                    table.concat(full, ", "), table.concat(shape, ", "))
      end
    end
  end
  local parts = {}
  if #missing > 0 then parts[#parts + 1] = "missing keys: " .. table.concat(missing, ", ") end
  if #unexpected > 0 then parts[#parts + 1] = "unexpected keys: " .. table.concat(unexpected, ", ") end
  if #mismatched > 0 then parts[#parts + 1] = "size mismatch: " .. table.concat(mismatched, "; ") end
  return #parts > 0 and table.concat(parts, "; ") or nil
end

-- A sharded model in force takes its shards as its own files would give
-- them (s.own[i], flat_shards.restore_own), built here without
-- gathering its parameters: each flat shard from the parameters that
-- overlap it, its optimizer's state shard by shard.
local function own_shards(c, s, i, model, files, sources, now, path)
  local sharded, optimizer = c.split:sharded(model), c.split:shard_optimizer(model)
  local flats = c.split:flat_layout(model)
  local dims = now.splits.models[i] or {}
  local names = {}
  for _, flat in ipairs(flats.flats) do
    for _, p in ipairs(flat.params) do names[p.name] = p.shape end
  end
  for name in model:named_buffers() do names[name] = true end
  local problem = misfit(sources.model, names, now.tp, dims)
  if problem then error(string.format("'%s' does not fit: %s", path, problem), 0) end
  -- The shards are made in their own dtype: a saved tensor of another kind
  -- would be converted silently (load.lua checks the other paths).
  local function check_dtype(name, dtype)
    local _, why = dtypes.loaded(sources.model.entries[name].dtype, dtype)
    if why then error(string.format("'%s': '%s' %s", path, name, why), 0) end
  end
  for k, flat in ipairs(flats.flats) do
    for _, p in ipairs(flat.params) do check_dtype(p.name, sharded:shards()[k].dtype) end
  end
  for name, b in model:named_buffers() do check_dtype(name, b.dtype) end
  local tensors = {}
  for k, shard in ipairs(sharded:shards()) do
    tensors["flat_" .. k] = flat_shards.shard_of(flats.flats[k], now.shard, shard.dtype, function(p)
      return read_part(files, sources.model, "model", dims, now.tp, p.name, path)
    end)
  end
  for name in model:named_buffers() do
    tensors[name] = read_part(files, sources.model, "model", dims, now.tp, name, path)
  end
  local j = c.split:optimizer_of(c.optimizers, model)
  s.own[i] = { sharded = sharded, optimizer = optimizer, tensors = tensors, file = path,
               optimizer_state = flat_shards.own_optimizer(flats, now.shard, optimizer,
                 full_reader(files, sources.optimizer, now.splits.optimizers[j], now.tp, path)) }
  s.own_optimizers[j] = true
end

-- Model i from `sources` (the saved full states of it and of its
-- optimizer, j in the checkpoint, unread): a sharded model in force takes
-- its shards (and its optimizer's), another its tp slices (s.models[i],
-- s.optimizers[j] when `j`).
local function take(c, s, i, j, files, sources, now, path)
  local model = c.models[i]
  if c.split:sharded(model) then return own_shards(c, s, i, model, files, sources, now, path) end
  s.models[i] = own_parts(files, sources.model, "model", now.splits.models[i], now.tp, path)
  if j then
    s.optimizers[j] = own_parts(files, sources.optimizer, "optimizer", now.splits.optimizers[j], now.tp,
                                s.mesh_layout_path)
  end
end

-- Reads what this rank keeps of the SHARDED_STATE_DICT checkpoint in
-- `folder`, whose mesh layout is s.mesh_layout, into s: the models and
-- optimizers not taken from this rank's own files already (s.models,
-- s.own, s.optimizers, s.own_optimizers), as load.lua restores them.
-- `open(name)` opens a tensor file verified against the manifest;
-- `flat_layouts[i]` = {layout = checked, path} when model i was saved as
-- flat shards (FSDP on the mesh).
function reshard.read(c, s, folder, open, flat_layouts)
  local models, optimizers = {}, {}
  for i in ipairs(c.models) do
    if not s.models[i] and not s.own[i] then models[#models + 1] = i end
  end
  for j in ipairs(c.optimizers) do
    if not s.optimizers[j] and not s.own_optimizers[j] then optimizers[#optimizers + 1] = j end
  end
  if #models + #optimizers == 0 then return end
  local saved, path = s.mesh_layout, s.mesh_layout_path
  local tp, files, now = saved.mesh.tp, tensor_files(open), mesh_in_force(c)
  local function split(kind, dims)
    return function(key, ndim) return tp_slices.split_dim(kind, dims or {}, key, ndim) end
  end
  -- Model i's and optimizer j's files of tp rank r (the first tp group's).
  local function model_slices(i)
    local function file(r) return layout.names.model_slices(i, r) end
    return tp_slices.slices_source(files, "model", file, tp, saved.splits.models[i], path)
  end
  local function optimizer_slices(j)
    local function file(r) return layout.names.optimizer_slices(j, r) end
    return tp_slices.slices_source(files, "optimizer", file, tp, saved.splits.optimizers[j], path)
  end
  local ok, err = pcall(function()
    for _, i in ipairs(models) do
      local model, flats = c.models[i], flat_layouts[i]
      if flats then
        local j = flats.layout.optimizer
        local params, indices = {}, {}
        for _, flat in ipairs(flats.layout.flats) do
          for _, p in ipairs(flat.params) do
            params[p.name] = #p.shape
            if p.optimizer_index >= 0 then indices[p.optimizer_index] = #p.shape end
          end
        end
        tp_slices.check_splits("model", saved.splits.models[i], params, path, "'" .. flats.path .. "'")
        tp_slices.check_splits("optimizer", saved.splits.optimizers[j], indices, path, "'" .. flats.path .. "'")
        -- Shard s of tp rank t: rank s x tp + t (tp is the innermost dim).
        local function model_file(shard, t) return layout.names.model_slices(i, shard * tp + t) end
        local function optimizer_file(shard, t) return layout.names.optimizer_slices(j, shard * tp + t) end
        local sources = {
          model = flat_shards.model_source(flats.layout, tp, files, model_file,
                                             split("model", saved.splits.models[i]), flats.path),
          optimizer = flat_shards.optimizer_source(flats.layout, tp, files, optimizer_file,
                                                     split("optimizer", saved.splits.optimizers[j]), flats.path),
        }
        s.model_files[i] = layout.names.sharding(i)
        take(c, s, i, j, files, sources, now, flats.path)
      else
        s.model_files[i] = layout.names.model_slices(i, c.state.process_index)
        local sources = { model = model_slices(i) }
        if c.split:sharded(model) then sources.optimizer = optimizer_slices(c.split:optimizer_of(c.optimizers, model)) end
        take(c, s, i, nil, files, sources, now, folder .. "/" .. s.model_files[i])
      end
    end
    for _, j in ipairs(optimizers) do
      if not s.optimizers[j] and not s.own_optimizers[j] then
        s.optimizers[j] = own_parts(files, optimizer_slices(j), "optimizer", now.splits.optimizers[j], now.tp, path)
      end
    end
  end)
  files.close()
  if not ok then error(err, 0) end
end

return reshard
