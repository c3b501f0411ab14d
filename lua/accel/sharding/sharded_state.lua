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
-- loads that.
local core = require("accel.core")
local args = require("accel.args")
local state_fields = require("accel.state_fields")

local sharded_state = {}

-- The layout of `sharded`, whose shards `optimizer` (the engine's) steps;
-- `unit_names[u][j]` names the j-th parameter of unit u.
function sharded_state.layout(sharded, optimizer, unit_names, world_size)
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
function sharded_state.model_tensors(sharded, model)
  local out = {}
  for k, shard in ipairs(sharded:shards()) do out[#out + 1] = { "flat_" .. k, shard } end
  for name, b in model:named_buffers() do out[#out + 1] = { name, b } end
  return out
end

-- A layout read from a checkpoint, checked before anything is sliced by
-- it: a file's contents are data, and a field of the wrong kind is an error
-- naming the file and the field.
function sharded_state.check_layout(layout, path)
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
    local problem = state_fields.list_problem(v)
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
  local listed, seen = 0, {}
  for k, flat in ipairs(layout.flats) do
    local where = "flats[" .. k .. "]"
    if flat.shard_numel * layout.world_size < flat.numel then
      fail(string.format("%s: %d ranks' shards of %d elements cannot hold its %d", where, layout.world_size,
                         flat.shard_numel, flat.numel))
    end
    for j, p in ipairs(flat.params) do
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
function sharded_state.same_layout(saved, current)
  return saved.world_size == current.world_size and same(saved.flats, current.flats)
end

-- Gives the shards, the buffers and the optimizer this rank's own state;
-- at stages 1 and 2 the full parameters are gathered from the shards after
-- (a collective).
function sharded_state.restore_own(sharded, model, optimizer, tensors, optimizer_state)
  core.no_grad(function()
    for k, shard in ipairs(sharded:shards()) do shard:copy_(tensors["flat_" .. k]) end
    for name, b in model:named_buffers() do b:copy_(tensors[name]) end
  end)
  optimizer:load_state_dict(optimizer_state)
  sharded:after_step()
end

-- Rank r's slice `piece` (named `name` in its file) of `flat`, checked
-- against the layout at `path`: slices join only when each is a shard.
local function shard_piece(piece, flat, r, name, path)
  if not piece then error(string.format("rank %d's file lacks '%s' that '%s' lists", r - 1, name, path), 0) end
  if piece:dim() ~= 1 or piece:numel() ~= flat.shard_numel then
    error(string.format("rank %d's '%s' is %s where '%s' says a shard of %d elements", r - 1, name,
                        args.shape(piece), path, flat.shard_numel), 0)
  end
  return piece
end

-- `files[r + 1]` is rank r's model file, read ({name = tensor}); returns the
-- flat parameters whole, unpadded slices joined in rank order.
local function whole_flats(layout, files, path)
  local out = {}
  for k, flat in ipairs(layout.flats) do
    local pieces = {}
    for r = 1, layout.world_size do pieces[r] = shard_piece(files[r]["flat_" .. k], flat, r, "flat_" .. k, path) end
    out[k] = core.cat(pieces, 1):narrow(1, 1, flat.numel)
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
function sharded_state.full_model(layout, files, path)
  local state = {}
  for k, whole in ipairs(whole_flats(layout, files, path)) do
    for _, p in ipairs(layout.flats[k].params) do state[p.name] = cut(whole, p) end
  end
  for name, t in pairs(files[1]) do
    if not name:match("^flat_%d+$") then state[name] = t end
  end
  return state
end

-- The full optimizer state, in the layout the optimizer had before
-- sharding (state.<i>.<slot> of each original parameter, the groups'
-- hyper-parameters), from every rank's optimizer file; `path` names the
-- layout's file in errors.
function sharded_state.full_optimizer(layout, files, path)
  local state, first = {}, 0
  for g, n in ipairs(layout.group_sizes) do
    local prefix = "param_groups." .. (g - 1) .. "."
    state[prefix .. "params"] = core.arange(first, first + n)
    first = first + n
    for key, value in pairs(files[1]) do
      if key:sub(1, #prefix) == prefix and key ~= prefix .. "params" then state[key] = value end
    end
  end
  for _, flat in ipairs(layout.flats) do
    if flat.optimizer_index >= 0 then
      local prefix = "state." .. flat.optimizer_index .. "."
      for key, value in pairs(files[1]) do
        if key:sub(1, #prefix) == prefix then
          local slot = key:sub(#prefix + 1)
          local whole = value
          if value:dim() > 0 then
            local pieces = {}
            for r = 1, layout.world_size do pieces[r] = shard_piece(files[r][key], flat, r, key, path) end
            whole = core.cat(pieces, 1):narrow(1, 1, flat.numel)
          end
          for _, p in ipairs(flat.params) do
            if p.optimizer_index >= 0 then
              state["state." .. p.optimizer_index .. "." .. slot] = value:dim() > 0 and cut(whole, p) or value:clone()
            end
          end
        end
      end
    end
  end
  return state
end

return sharded_state
