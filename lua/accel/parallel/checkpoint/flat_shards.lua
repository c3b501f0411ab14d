-- SHARDED_STATE_DICT checkpoints of a sharded model (docs/api/sharding.md):
-- each rank writes, without any collective, its own slices of the model's
-- flat parameters ("flat_<k>", plus the model's buffers) and its sharded
-- optimizer's state as the optimizer keeps it; the main process writes the
-- layout, which names every parameter of every flat parameter with its
-- offset and shape and the optimizer's indices. checkpointing.lua decides
-- the file names and verifies them against the manifest.
--
-- Loading on the same world size and layout, each rank reads back only its
-- own files. Anything else (another world size, another stage or wrap
-- policy, no sharding at all) reassembles the full model and optimizer
-- state from every rank's files, in the layout FULL_STATE_DICT writes, and
-- loads that. Checkpoints of a device mesh are read instead one parameter
-- at a time, each rank only the ranges of shards it keeps (the sources and
-- shards at the end; parallel/checkpoint/reshard.lua).
local core = require("accel.core")
local args = require("accel.util.args")
local field_checks = require("accel.util.field_checks")
local sorted_keys = require("accel.util.sorted_keys")

local flat_shards = {}

-- The layout of `sharded`, whose shards `optimizer` (the engine's) steps;
-- `unit_names[u][j]` names the j-th parameter of unit u.
function flat_shards.layout(sharded, optimizer, unit_names, world_size)
  local raw = sharded:flat_parameters(optimizer)
  local flats = {}
  for k, flat in ipairs(raw.flats) do
    local params = {}
    for j, p in ipairs(flat.params) do
      params[j] = { name = unit_names[p.unit][p.position], offset = p.offset, shape = p.shape,
                    optimizer_index = p.optimizer_index }
    end
    flats[k] = { numel = flat.numel, shard_numel = flat.shard_numel, optimizer_index = flat.optimizer_index,
                 params = params }
  end
  return { stage = sharded:stage(), world_size = world_size, group_sizes = raw.group_sizes, flats = flats }
end

-- This rank's model file: its slice of every flat parameter, and the
-- model's buffers (the same on every rank).
function flat_shards.model_tensors(sharded, model)
  local out = {}
  for k, shard in ipairs(sharded:shards()) do out[#out + 1] = { "flat_" .. k, shard } end
  for name, b in model:named_buffers() do out[#out + 1] = { name, b } end
  return out
end

-- A layout read from a checkpoint, checked before anything is sliced by
-- it: a file's contents are data, and a field of the wrong kind is an error
-- naming the file and the field.
function flat_shards.check_layout(layout, path)
  local function fail(what) error(string.format("'%s': %s", path, what), 0) end
  local function whole(v, what, least)
    if type(v) ~= "number" or v % 1 ~= 0 or v < least then
      fail(string.format("%s must be a whole number of at least %d, got %s", what, least, tostring(v)))
    end
  end
  local function record(v, what)
    if type(v) ~= "table" then fail(what .. " must be a table, got a " .. type(v)) end
    return v
  end
  -- A list holds keys 1 to n and nothing else (ipairs would skip the rest).
  local function list(v, what)
    if type(v) ~= "table" then fail(what .. " must be a list, got a " .. type(v)) end
    local problem = field_checks.list_problem(v)
    if problem then fail(what .. " must be a list, but " .. problem) end
    return v
  end
  record(layout, "the layout")
  whole(layout.world_size, "world_size", 1)
  whole(layout.optimizer, "optimizer", 1)
  for g, n in ipairs(list(layout.group_sizes, "group_sizes")) do whole(n, "group_sizes[" .. g .. "]", 0) end
  for k, flat in ipairs(list(layout.flats, "flats")) do
    local where = "flats[" .. k .. "]"
    record(flat, where)
    whole(flat.numel, where .. ".numel", 0)
    whole(flat.shard_numel, where .. ".shard_numel", 0)
    whole(flat.optimizer_index, where .. ".optimizer_index", -1)
    for j, p in ipairs(list(flat.params, where .. ".params")) do
      local at = where .. ".params[" .. j .. "]"
      if type(record(p, at).name) ~= "string" then fail(at .. ".name must be a string") end
      whole(p.offset, at .. ".offset", 0)
      whole(p.optimizer_index, at .. ".optimizer_index", -1)
      for d, size in ipairs(list(p.shape, at .. ".shape")) do whole(size, at .. ".shape[" .. d .. "]", 0) end
    end
  end
  -- What the load allocates or slices by these numbers must agree with the
  -- flats: no slice past its flat parameter, shards that cover it, and
  -- group sizes that count the parameters listed (each listed once).
  local listed, seen, names = 0, {}, {}
  for k, flat in ipairs(layout.flats) do
    local where = "flats[" .. k .. "]"
    if flat.shard_numel * layout.world_size < flat.numel then
      fail(string.format("%s: %d ranks' shards of %d elements cannot hold its %d", where, layout.world_size,
                         flat.shard_numel, flat.numel))
    end
    for j, p in ipairs(flat.params) do
      if names[p.name] then fail(string.format("%s.params[%d] names '%s', listed twice", where, j, p.name)) end
      names[p.name] = true
      local numel = 1
      for _, size in ipairs(p.shape) do numel = numel * size end
      if p.offset + numel > flat.numel then
        fail(string.format("%s.params[%d] ('%s') ends at element %.0f of a flat parameter of %d", where, j, p.name,
                           p.offset + numel, flat.numel))
      end
      if p.optimizer_index >= 0 then
        if seen[p.optimizer_index] then
          fail(string.format("%s.params[%d] ('%s') has optimizer_index %d, listed twice", where, j, p.name,
                             p.optimizer_index))
        end
        seen[p.optimizer_index], listed = true, listed + 1
      end
    end
  end
  local total = 0
  for _, n in ipairs(layout.group_sizes) do total = total + n end
  if total ~= listed then
    fail(string.format("group_sizes count %.0f parameters but the flats list %d", total, listed))
  end
  for index in pairs(seen) do
    if index >= total then fail(string.format("optimizer_index %d is past the %d parameters", index, total)) end
  end
  return layout
end

local function same(a, b)
  if type(a) ~= "table" or type(b) ~= "table" then return a == b end
  for k, v in pairs(a) do
    if not same(v, b[k]) then return false end
  end
  for k in pairs(b) do
    if a[k] == nil then return false end
  end
  return true
end

-- Whether this rank can take its own files as they are: the same world
-- size and the same flat parameters (the stage itself may differ between 1
-- and 2, which cut flat parameters alike).
function flat_shards.same_layout(saved, current)
  return saved.world_size == current.world_size and same(saved.flats, current.flats)
end

-- Gives the shards, the buffers and the optimizer this rank's own state;
-- at stages 1 and 2 the full parameters are gathered from the shards after
-- (a collective).
function flat_shards.restore_own(sharded, model, optimizer, tensors, optimizer_state)
  core.no_grad(function()
    for k, shard in ipairs(sharded:shards()) do shard:copy_(tensors["flat_" .. k]) end
    for name, b in model:named_buffers() do b:copy_(tensors[name]) end
  end)
  optimizer:load_state_dict(optimizer_state)
  sharded:after_step()
end

-- Rank r's slice `piece` (named `name` in its file) of `flat`, checked
-- against the layout at `path`: slices join only when each is a shard.
-- `dtype`, when given, is the first shard's: a slice of another would be
-- converted silently when joined.
local function shard_piece(piece, flat, r, name, path, dtype)
  if not piece then error(string.format("rank %d's file lacks '%s' that '%s' lists", r - 1, name, path), 0) end
  if piece:dim() ~= 1 or piece:numel() ~= flat.shard_numel then
    error(string.format("rank %d's '%s' is %s where '%s' says a shard of %d elements", r - 1, name,
                        args.shape(piece), path, flat.shard_numel), 0)
  end
  if dtype and piece.dtype ~= dtype then
    error(string.format("rank %d's '%s' is %s where the first shard's is %s (the shards '%s' lists join as one "
                        .. "tensor)", r - 1, name, piece.dtype, dtype, path), 0)
  end
  return piece
end

-- Every rank's slices of tensor `name` (`slice(r)`, r from 1), checked,
-- joined in rank order.
local function joined(layout, flat, name, path, slice)
  local pieces = {}
  for r = 1, layout.world_size do
    pieces[r] = shard_piece(slice(r), flat, r, name, path, pieces[1] and pieces[1].dtype)
  end
  return core.cat(pieces, 1):narrow(1, 1, flat.numel)
end

-- The flat parameters a model file holds ("flat_<k>") are the layout's.
local function check_flat_names(layout, names, file, path)
  for _, name in ipairs(names) do
    local k = tonumber(name:match("^flat_(%d+)$") or "")
    if k and not layout.flats[k] then
      error(string.format("%s holds '%s' but '%s' lists %d flat parameter(s)", file, name, path, #layout.flats), 0)
    end
  end
end

-- `files[r + 1]` is rank r's model file, read ({name = tensor}); returns the
-- flat parameters whole, unpadded slices joined in rank order.
local function whole_flats(layout, files, path)
  check_flat_names(layout, sorted_keys(files[1]), "rank 0's model file", path)
  local out = {}
  for k, flat in ipairs(layout.flats) do
    out[k] = joined(layout, flat, "flat_" .. k, path, function(r) return files[r]["flat_" .. k] end)
  end
  return out
end

-- Parameter `p`'s own elements of its flat parameter `whole`, in its shape.
local function cut(whole, p)
  local numel = 1
  for _, d in ipairs(p.shape) do numel = numel * d end
  return whole:narrow(1, p.offset + 1, numel):view(p.shape):clone()
end

-- The full model state, {name = tensor}, from every rank's model file;
-- `path` names the layout's file in errors.
function flat_shards.full_model(layout, files, path)
  local state = {}
  for k, whole in ipairs(whole_flats(layout, files, path)) do
    for _, p in ipairs(layout.flats[k].params) do state[p.name] = cut(whole, p) end
  end
  for name, t in pairs(files[1]) do
    if not name:match("^flat_%d+$") then state[name] = t end
  end
  return state
end

-- Walks the keys of a sharded optimizer's file (`names`, sorted) in the
-- layout before sharding: groups(key, params) for each group's `params`
-- entry (key and the indices of its parameters) and for its options
-- (params nil); slots(flat, key, slot) for each slot of each flat
-- parameter the optimizer steps.
local function walk_optimizer(layout, names, groups, slots)
  local first = 0
  for g, n in ipairs(layout.group_sizes) do
    local prefix = "param_groups." .. (g - 1) .. "."
    groups(prefix .. "params", core.arange(first, first + n))
    first = first + n
    for _, key in ipairs(names) do
      if key:sub(1, #prefix) == prefix and key ~= prefix .. "params" then groups(key) end
    end
  end
  for _, flat in ipairs(layout.flats) do
    if flat.optimizer_index >= 0 then
      local prefix = "state." .. flat.optimizer_index .. "."
      for _, key in ipairs(names) do
        if key:sub(1, #prefix) == prefix then slots(flat, key, key:sub(#prefix + 1)) end
      end
    end
  end
end

-- The full optimizer state, in the layout the optimizer had before
-- sharding (state.<i>.<slot> of each original parameter, the groups'
-- hyper-parameters), from every rank's optimizer file; `path` names the
-- layout's file in errors.
function flat_shards.full_optimizer(layout, files, path)
  local state = {}
  walk_optimizer(layout, sorted_keys(files[1]), function(key, params) state[key] = params or files[1][key] end,
    function(flat, key, slot)
      local value = files[1][key]
      local whole = value
      if value:dim() > 0 then whole = joined(layout, flat, key, path, function(r) return files[r][key] end) end
      for _, p in ipairs(flat.params) do
        if p.optimizer_index >= 0 then
          state["state." .. p.optimizer_index .. "." .. slot] = value:dim() > 0 and cut(whole, p) or value:clone()
        end
      end
    end)
  return state
end

-- Reading flat shards one parameter at a time, for loading on another mesh
-- or world size without any rank holding the whole model
-- (parallel/checkpoint/reshard.lua).

local function numel_of(shape)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  return n
end

-- Parameter `p` of flat parameter `flat`, a new tensor in p's shape and
-- `dtype` (the first shard's), from the shards holding its elements:
-- `shard(s)` gives the tensor named `name` in shard s's file (from 0; nil when the file lacks it) and is asked only
-- for the shards p overlaps.
local function read_param(flat, p, name, dtype, shard, path)
  local numel, size = numel_of(p.shape), flat.shard_numel
  local function piece(s) return shard_piece(shard(s), flat, s + 1, name, path, dtype) end
  if numel == 0 then return core.empty(p.shape, { dtype = dtype }) end
  local out = core.empty({ numel }, { dtype = dtype })
  for s = math.floor(p.offset / size), math.floor((p.offset + numel - 1) / size) do
    local from = piece(s)
    local first, last = math.max(p.offset, s * size), math.min(p.offset + numel, (s + 1) * size)
    out:narrow(1, first - p.offset + 1, last - first):copy_(from:narrow(1, first - s * size + 1, last - first))
  end
  return out:view(p.shape)
end

-- An empty source, and the function adding entry `entry` under `key`.
local function new_source()
  local source = { keys = {}, entries = {} }
  return source, function(key, entry)
    source.keys[#source.keys + 1] = key
    source.entries[key] = entry
  end
end

-- The entry of a source for `key` of parameter `p` of `flat` (p itself,
-- or a slot of its optimizer state), in tensor `name` of the shards of a
-- checkpoint saved on `tp` ranks' slices (split along `split(key, ndim)`):
-- its full shape, and each saved tp rank's slice read from the shards
-- holding it.
local function flat_entry(key, flat, p, name, dtype, split, tp, files, file_of, path)
  local dim = split(key, #p.shape)
  local shape = { unpack(p.shape) }
  if dim then shape[dim] = shape[dim] * tp end
  return { shape = shape, dtype = dtype, dim = dim, tp = tp, piece = function(t)
    return read_param(flat, p, name, dtype, function(s) return files.tensor(file_of(s, t), name) end, path)
  end }
end

-- The full model state of the flat shards of a checkpoint saved on `tp`
-- ranks' slices (1 without tensor parallelism), as a source
-- (checkpoint/tp_slices.lua: its tensors read one at a time): `files.tensor(
-- file_of(s, t), name)` is tensor `name` of shard s of tp rank t's slices
-- (both from 0), `files.keys` and `files.info` its names and their shape;
-- `split(key, ndim)` is a tensor's split dim over tp; `path` names the
-- layout in errors. The buffers are tp rank 0's first shard's, whole.
function flat_shards.model_source(layout, tp, files, file_of, split, path)
  local source, add = new_source()
  local first = file_of(0, 0)
  check_flat_names(layout, files.keys(first), "'" .. first .. "'", path)
  for k, flat in ipairs(layout.flats) do
    local name = "flat_" .. k
    local info = files.info(first, name)
    if not info then error(string.format("'%s' lacks '%s' that '%s' lists", first, name, path), 0) end
    local dtype = info.dtype
    for _, p in ipairs(flat.params) do
      add(p.name, flat_entry(p.name, flat, p, name, dtype, split, tp, files, file_of, path))
    end
  end
  for _, key in ipairs(files.keys(first)) do
    if not key:match("^flat_%d+$") then
      local info = files.info(first, key)
      add(key, { shape = info.shape, dtype = info.dtype, piece = function(t)
        return files.tensor(file_of(0, t), key)
          or error(string.format("tp rank %d's file lacks '%s' that '%s' lists", t, key, path), 0)
      end })
    end
  end
  table.sort(source.keys)
  return source
end

-- The full optimizer state (as full_optimizer makes it) of the same
-- shards' optimizer files, as a source.
function flat_shards.optimizer_source(layout, tp, files, file_of, split, path)
  local source, add = new_source()
  local first = file_of(0, 0)
  -- Tensor `key` of tp rank t's first shard.
  local function saved(key)
    return function(t)
      return files.tensor(file_of(0, t), key)
        or error(string.format("tp rank %d's first shard lacks '%s' that '%s' lists", t, key, path), 0)
    end
  end
  walk_optimizer(layout, files.keys(first), function(key, params)
    if params then
      add(key, { shape = { params:numel() }, dtype = "int64", piece = function() return params end })
    else
      add(key, { shape = files.info(first, key).shape, dtype = files.info(first, key).dtype, piece = saved(key) })
    end
  end, function(flat, key, slot)
    local info = files.info(first, key)
    for _, p in ipairs(flat.params) do
      if p.optimizer_index >= 0 then
        local full_key = "state." .. p.optimizer_index .. "." .. slot
        if #info.shape == 0 then
          add(full_key, { shape = {}, dtype = info.dtype, piece = saved(key) })
        else
          add(full_key, flat_entry(full_key, flat, p, key, info.dtype, split, tp, files, file_of, path))
        end
      end
    end
  end)
  table.sort(source.keys)
  return source
end

-- This rank's shard (of `rank`, from 0) of flat parameter `flat` (of the
-- layout in force), a new tensor of `dtype`: the elements of its
-- parameters that fall in it, `part(p)` giving parameter p whole (nil: it
-- has none, zeros), asked only for the parameters that overlap the shard;
-- zeros past the last one.
function flat_shards.shard_of(flat, rank, dtype, part)
  local size = flat.shard_numel
  local out, first = core.zeros({ size }, { dtype = dtype }), rank * size
  for _, p in ipairs(flat.params) do
    local numel = numel_of(p.shape)
    local a, b = math.max(first, p.offset), math.min(first + size, p.offset + numel)
    local whole = a < b and part(p)
    if whole then out:narrow(1, a - first + 1, b - a):copy_(whole:reshape(-1):narrow(1, a - p.offset + 1, b - a)) end
  end
  return out
end

-- This rank's state of the sharded optimizer `optimizer` (the engine's) of
-- `layout` (the model in force), in the optimizer's own layout, one entry a
-- shard, as restore_own takes it; from a full optimizer state read one
-- entry at a time: `full.keys` (state.<i>.<slot> of each parameter i of
-- the layout before sharding, param_groups.<g>.<option>), `full.shape(key)`,
-- `full.dtype(key)` and `full.read(key)`, the entry as this rank keeps it
-- (its tp slice).
function flat_shards.own_optimizer(layout, rank, optimizer, full)
  local slots, options = {}, {}
  for _, key in ipairs(full.keys) do
    local index, slot = key:match("^state%.(%d+)%.(.+)$")
    local group, option = key:match("^param_groups%.(%d+)%.(.+)$")
    if index then
      index = tonumber(index)
      slots[index] = slots[index] or {}
      slots[index][slot] = key
    elseif group and option ~= "params" then
      group = tonumber(group)
      options[group] = options[group] or {}
      options[group][#options[group] + 1] = key
    end
  end
  local state = {}
  for _, flat in ipairs(layout.flats) do
    if flat.optimizer_index >= 0 then
      local kept = {}  -- slot -> a key of it in the full state
      for _, p in ipairs(flat.params) do
        for slot, key in pairs(slots[p.optimizer_index] or {}) do kept[slot] = kept[slot] or key end
      end
      for _, slot in ipairs(sorted_keys(kept)) do
        local key, sample = "state." .. flat.optimizer_index .. "." .. slot, kept[slot]
        if #full.shape(sample) == 0 then  -- a step count, the same for every parameter
          state[key] = full.read(sample)
        else
          state[key] = flat_shards.shard_of(flat, rank, full.dtype(sample), function(p)
            local own = slots[p.optimizer_index] and slots[p.optimizer_index][slot]
            return own and full.read(own)
          end)
        end
      end
    end
  end
  local at = 0
  for g = 1, optimizer:num_param_groups() do
    local n = #optimizer:params(g)
    state["param_groups." .. (g - 1) .. ".params"] = core.arange(at, at + n)
    at = at + n
    for _, key in ipairs(options[g - 1] or {}) do state[key] = full.read(key) end
  end
  return state
end

return flat_shards
