-- Checkpoints of models split over a device mesh's tp dim (tensor
-- parallelism): what each tensor's split is, and the full tensors made from
-- slices and slices made from full tensors. checkpointing/save.lua and
-- load.lua decide the files (docs/api/parallelism.md, "Checkpoints under a
-- mesh"):
--   FULL_STATE_DICT     the main process writes the full model and
--                       optimizer state (gathered over tp), as one process
--                       would; loading slices it for the mesh in force
--   SHARDED_STATE_DICT  each rank writes its own slices; the layout (below)
--                       says how each tensor is split, so another mesh
--                       reads, tensor by tensor, only the parts of the
--                       first tp group's slices that each rank keeps
--                       (a source, below; parallel/checkpoint/reshard.lua)
-- With FSDP on the mesh (dp_shard > 1) a rank's flat shards are of its tp
-- slices: FULL gathers them over dp_shard first (the Accelerator's full
-- parameters, the sharded optimizer's full state), SHARDED writes them as
-- plain FSDP does (parallel/checkpoint/flat_shards.lua), and another mesh reads each
-- tp rank's slice of a parameter from the shards holding it.
-- A model parameter is split when its module says so (tp_split_dims, as
-- ColwiseLinear does); an optimizer's state for a parameter
-- ("state.<i>.<slot>", the engine's flat state dict) is split like the
-- parameter, except 0-dim slots (AdamW's step), which are whole.
local core = require("accel.core")
local field_checks = require("accel.util.field_checks")
local tp_parameters = require("accel.parallel.tp_parameters")
local tp_slice = require("accel.parallel.tp_slice")
local sorted_keys = require("accel.util.sorted_keys")
local same_tensor = require("accel.util.same_tensor")

local tp_slices = {}

-- The layout's mesh sizes, outermost dim first (device_mesh.lua).
local SIZES = { "dp_replicate", "dp_shard", "cp", "tp" }

-- The parameters of an optimizer (engine or prepared), in the order of its
-- state's indices: the groups' lists one after another.
local function optimizer_params(opt)
  local out = {}
  for g = 1, opt:num_param_groups() do
    for _, p in ipairs(opt:params(g)) do out[#out + 1] = p end
  end
  return out
end

-- How this rank's tensors are split: {models = {[i] = {name = dim}},
-- optimizers = {[j] = {[state index] = dim}}}, dims 1-based. An optimizer's
-- parameter is found among the models' by identity (is_set_to); one that is
-- no model's is whole. An optimizer stepping a model's flat shards (FSDP
-- over dp_shard) holds no parameter of the model: `sharded[j]` = {model =
-- i, layout = flat_shards.layout(...)} names the parameter of each index
-- of its full state (the indices before sharding).
function tp_slices.splits(models, optimizers, sharded)
  local out, by_shape = { models = {}, optimizers = {} }, {}
  for i, model in ipairs(models) do
    local dims = {}
    for _, entry in ipairs(tp_parameters.list(model)) do
      if entry[3] then
        dims[entry[1]] = entry[3]
        local shape = table.concat(entry[2]:size(), "x")
        by_shape[shape] = by_shape[shape] or {}
        table.insert(by_shape[shape], entry)
      end
    end
    out.models[i] = dims
  end
  for j, opt in ipairs(optimizers) do
    local dims, flat = {}, sharded and sharded[j]
    if flat then
      for _, f in ipairs(flat.layout.flats) do
        for _, p in ipairs(f.params) do
          if p.optimizer_index >= 0 then dims[p.optimizer_index] = out.models[flat.model][p.name] end
        end
      end
    else
      for k, p in ipairs(optimizer_params(opt)) do
        for _, entry in ipairs(by_shape[table.concat(p:size(), "x")] or {}) do
          if same_tensor(p, entry[2]) then dims[k - 1] = entry[3] end
        end
      end
    end
    out.optimizers[j] = dims
  end
  return out
end

-- The split dim of `key` (a tensor of `ndim` dims) in a model's (kind
-- "model") or an optimizer's state, or nil when it is whole; an optimizer's
-- entry is split like its parameter ("state.<i>.<slot>") unless it has
-- fewer dims (a step count).
function tp_slices.split_dim(kind, dims, key, ndim)
  if kind == "model" then return dims[key] end
  local index = key:match("^state%.(%d+)%.")
  local dim = index and dims[tonumber(index)]
  return dim and ndim >= dim and dim or nil
end

-- A new state: fn(key, t, dim) for each split tensor of `state`, the
-- others as they are; keys in sorted order, the same on every rank, so
-- that collectives in fn pair up.
local function map_split(kind, state, dims, fn)
  local out = {}
  for _, key in ipairs(sorted_keys(state)) do
    local t = state[key]
    local dim = tp_slices.split_dim(kind, dims, key, t:dim())
    out[key] = dim and fn(key, t, dim) or t
  end
  return out
end

-- `state` (name -> this rank's tensor) with its split tensors gathered over
-- `tp`: the full state, on every tp rank (a collective).
function tp_slices.gather(kind, state, dims, tp)
  return map_split(kind, state, dims, function(_, t, dim) return tp_slice.gather(t, dim, tp) end)
end

-- The error for a split of `n` along `dim` that tp cannot cut evenly.
local function uneven(path, key, n, dim, tp)
  return string.format("'%s': '%s' has %d along dim %d, which does not split evenly over tp_size %d", path, key, n,
                       dim, tp.size)
end

-- This tp rank's slice of every split tensor of a full `state`; the error
-- names `path` and the key when a size does not divide by tp.
function tp_slices.slice(kind, state, dims, tp, path)
  return map_split(kind, state, dims, function(key, t, dim)
    local n = t:size(dim)
    if n % tp.size ~= 0 then error(uneven(path, key, n, dim, tp), 0) end
    local width = n / tp.size
    return t:narrow(dim, tp.rank * width + 1, width):clone()
  end)
end

-- A saved state read one tensor at a time (loading on another mesh without
-- any rank holding the whole state: parallel/checkpoint/reshard.lua) is a
-- source: {keys = its keys, sorted; entries = {key = {shape = the full
-- tensor's, dtype, dim = the dim it was saved split along over `tp` ranks
-- or nil, tp, piece = function(t) -> saved tp rank t's part, read only
-- when called}}}.

-- The source of the tp slices in the files of one tp group's ranks
-- (`files.keys`, `files.info` and `files.tensor` of file `name_of(r)`, tp
-- rank r's, from 0); `path` names the layout in errors.
function tp_slices.slices_source(files, kind, name_of, tp, dims, path)
  local source = { keys = files.keys(name_of(0)), entries = {} }
  tp_slices.check_splits(kind, dims, tp_slices.held(kind, source.keys, function(key)
    return files.info(name_of(0), key).shape
  end), path, name_of(0))
  for _, key in ipairs(source.keys) do
    local info = files.info(name_of(0), key)
    local dim = tp_slices.split_dim(kind, dims, key, #info.shape)
    local shape = { unpack(info.shape) }
    if dim then shape[dim] = shape[dim] * tp end
    source.entries[key] = { shape = shape, dtype = info.dtype, dim = dim, tp = tp, piece = function(r)
      return files.tensor(name_of(r), key)
        or error(string.format("tp rank %d's file lacks '%s' that '%s' splits", r, key, path), 0)
    end }
  end
  return source
end

-- What a checkpoint holds that a layout's splits must name, from `keys`
-- (a file's tensor names) and `shape(key)`: a model's tensors (name ->
-- their dims); an optimizer's parameters (index -> the most dims of any of
-- its state slots, or false when it has no state), which its
-- "param_groups.<g>.params" lists count.
function tp_slices.held(kind, keys, shape)
  local held = {}
  if kind == "model" then
    for _, key in ipairs(keys) do held[key] = #shape(key) end
    return held
  end
  local params = 0
  for _, key in ipairs(keys) do
    if key:match("^param_groups%.%d+%.params$") then
      for _, n in ipairs(shape(key)) do params = params + n end
    end
  end
  for index = 0, params - 1 do held[index] = false end
  for _, key in ipairs(keys) do
    local index = tonumber(key:match("^state%.(%d+)%.") or "")
    if index and held[index] ~= nil then held[index] = math.max(held[index] or 0, #shape(key)) end
  end
  return held
end

-- Every split `dims` lists (a model's or an optimizer's, kind) is of a
-- tensor `held` (tp_slices.held) names, along one of its dims; `path` names
-- the layout and `where` the file holding them. An optimizer's slots of
-- fewer dims than the split (a step count) stay whole.
function tp_slices.check_splits(kind, dims, held, path, where)
  for _, key in ipairs(sorted_keys(dims)) do
    local ndim, what = held[key], kind == "model" and "'" .. key .. "'" or "the state of parameter " .. key
    if ndim == nil then
      error(string.format("'%s' splits %s, which %s does not hold", path, what, where), 0)
    end
    if ndim and dims[key] > ndim then
      error(string.format("'%s' splits %s of %s along dim %d, but the tensor has %d dims", path, what, where,
                          dims[key], ndim), 0)
    end
  end
end

-- This tp rank's part of `key` of `source`: its slice along `dim` (nil:
-- the whole tensor), a new tensor made from the saved pieces that overlap
-- it, each read only if it does; `path` names the file in errors.
function tp_slices.part(source, key, dim, tp, path)
  local e = source.entries[key]
  local shape, first = { unpack(e.shape) }, 0
  if #shape == 0 then return e.piece(0):clone() end
  if dim then
    if shape[dim] % tp.size ~= 0 then error(uneven(path, key, shape[dim], dim, tp), 0) end
    shape[dim] = shape[dim] / tp.size
    first = tp.rank * shape[dim]
  end
  local out = core.empty(shape, { dtype = e.dtype })
  local cut = { dim }
  if e.dim and e.dim ~= dim then cut[#cut + 1] = e.dim end
  for r = 0, (e.dim and e.tp or 1) - 1 do
    -- Along each cut dim, the overlap of saved piece r and this rank's part
    -- (0-based, end excluded), and where it starts in each.
    local overlaps = {}
    for _, d in ipairs(cut) do
      local piece_first, piece_last = 0, e.shape[d]
      if d == e.dim then piece_first, piece_last = r * e.shape[d] / e.tp, (r + 1) * e.shape[d] / e.tp end
      local part_first, part_last = 0, e.shape[d]
      if d == dim then part_first, part_last = first, first + shape[d] end
      local a, b = math.max(piece_first, part_first), math.min(piece_last, part_last)
      if a >= b then
        overlaps = nil
        break
      end
      overlaps[#overlaps + 1] = { d, a, b - a, piece_first, part_first }
    end
    if overlaps then
      local piece, into = e.piece(r), out
      if piece.dtype ~= e.dtype then
        error(string.format("'%s': tp rank %d's '%s' is %s where tp rank 0's is %s", path, r, key, piece.dtype,
                            e.dtype), 0)
      end
      local expected = { unpack(e.shape) }
      if e.dim then expected[e.dim] = e.shape[e.dim] / e.tp end
      if table.concat(piece:size(), "x") ~= table.concat(expected, "x") then
        error(string.format("'%s': tp rank %d's '%s' is %s where %s was expected", path, r, key,
                            table.concat(piece:size(), "x"), table.concat(expected, "x")), 0)
      end
      for _, o in ipairs(overlaps) do
        piece = piece:narrow(o[1], o[2] - o[4] + 1, o[3])
        into = into:narrow(o[1], o[2] - o[5] + 1, o[3])
      end
      into:copy_(piece)
    end
  end
  return out
end

-- What the layout file holds: the mesh saved on, the world size, the
-- state-dict type, and each split tensor's dim.
function tp_slices.layout(mesh, splits, world_size, state_dict_type)
  local models, optimizers = {}, {}
  for i, dims in ipairs(splits.models) do
    models[i] = {}
    for _, name in ipairs(sorted_keys(dims)) do table.insert(models[i], { name = name, dim = dims[name] }) end
  end
  for j, dims in ipairs(splits.optimizers) do
    optimizers[j] = {}
    for _, index in ipairs(sorted_keys(dims)) do table.insert(optimizers[j], { index = index, dim = dims[index] }) end
  end
  return { mesh = tp_slices.sizes(mesh), world_size = world_size, state_dict_type = state_dict_type, models = models,
           optimizers = optimizers }
end

-- A layout read from a checkpoint, checked (a file's contents are data: a
-- field of the wrong kind is an error naming the file and the field), with
-- its split dims as lookups: {models = {[i] = {name = dim}}, optimizers =
-- {[j] = {[index] = dim}}} in `layout.splits`.
function tp_slices.check_layout(layout, path)
  local where = "'" .. path .. "'"
  field_checks.check(layout, { { "mesh", "table" }, { "world_size", "positive count" }, { "models", "table" },
                               { "optimizers", "table" } }, where)
  local product = 1
  for _, dim in ipairs(SIZES) do
    field_checks.check(layout.mesh, { { dim, "positive count" } }, where .. " (mesh)")
    product = product * layout.mesh[dim]
  end
  if product ~= layout.world_size then
    error(string.format("%s: the mesh's sizes multiply to %d but world_size is %d", where, product,
                        layout.world_size), 0)
  end
  if layout.state_dict_type ~= "FULL_STATE_DICT" and layout.state_dict_type ~= "SHARDED_STATE_DICT" then
    error(string.format("%s: 'state_dict_type' must be FULL_STATE_DICT or SHARDED_STATE_DICT, got %s", where,
                        tostring(layout.state_dict_type)), 0)
  end
  local splits = { models = {}, optimizers = {} }
  -- A model's splits name its tensors, an optimizer's its parameters by
  -- their index in its state (from 0).
  for _, part in ipairs({ { "models", "name", "string" }, { "optimizers", "index", "number" } }) do
    local lists = layout[part[1]]
    local problem = field_checks.list_problem(lists)
    if problem then error(string.format("%s: '%s' must be a list, but it %s", where, part[1], problem), 0) end
    for i, list in ipairs(lists) do
      local at = string.format("%s (%s[%d])", where, part[1], i)
      if type(list) ~= "table" or field_checks.list_problem(list) then error(at .. ": must be a list", 0) end
      local dims = {}
      splits[part[1]][i] = dims
      for _, entry in ipairs(list) do
        field_checks.check(entry, { { "dim", "positive count" } }, at)
        local key = entry[part[2]]
        if part[3] == "number" then
          field_checks.check(entry, { { part[2], "count" } }, at)
        elseif type(key) ~= part[3] then
          error(string.format("%s: '%s' must be a %s, got %s", at, part[2], part[3], tostring(key)), 0)
        end
        if dims[key] then error(string.format("%s: '%s' %s is listed twice", at, part[2], tostring(key)), 0) end
        dims[key] = entry.dim
      end
    end
  end
  layout.splits = splits
  return layout
end

-- Whether `mesh` (acc.mesh, or nil for none) has the sizes the layout was
-- saved on, so that every rank's own files fit it as they are.
function tp_slices.same_mesh(layout, mesh)
  if not mesh then return false end
  for _, dim in ipairs(SIZES) do
    if layout.mesh[dim] ~= mesh[dim].size then return false end
  end
  return true
end

-- A mesh's sizes by dim: {dp_replicate = 1, dp_shard = 1, cp = 1, tp = 2}.
function tp_slices.sizes(mesh)
  local sizes = {}
  for _, dim in ipairs(SIZES) do sizes[dim] = mesh[dim].size end
  return sizes
end

-- "dp_replicate 1 x dp_shard 1 x cp 1 x tp 2" for tp_slices.sizes' table, for messages.
function tp_slices.describe(sizes)
  local parts = {}
  for _, dim in ipairs(SIZES) do parts[#parts + 1] = dim .. " " .. sizes[dim] end
  return table.concat(parts, " x ")
end

return tp_slices
