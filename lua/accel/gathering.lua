-- Collectives on tensors and Lua values, for the Accelerator: gather,
-- gather_for_metrics, pad_across_processes, gather_object, reduce,
-- broadcast, split_between_processes. Each takes the world (rank, size)
-- explicitly, so it is testable and holds no state.
local core = require("accel.core")
local rank_list = require("accel.util.rank_list")
local serialize = require("accel.util.serialize")
local guard = require("accel.collective_guard")
local args = require("accel.util.args")
local dataset = require("accel.data.dataset")
local Subset = require("accel.data.subset")
local bit = require("bit")

local dist = core.dist
local gathering = {}

-- Tables crossing ranks ------------------------------------------------------
--
-- Lua's `pairs` order differs between processes, so every table a
-- collective takes is walked in one canonical key order: number keys first,
-- ascending, then string keys, sorted; keys of other types are refused.
-- Under --debug (accel.core.launch.debug), the ranks first exchange a hash of the
-- value's key structure, and when it differs, every rank fails naming the
-- ranks and the keys instead of pairing different keys.

-- Whether collectives over tables check that every rank passed the same
-- keys (accel-run --debug). A field, so a test can turn it on.
gathering.debug = (core.launch or {}).debug == true

local function key_text(k, first)
  if type(k) == "string" and k:match("^[%a_][%w_]*$") then return first and k or ("." .. k) end
  if type(k) == "string" then return string.format("[%q]", k) end
  return "[" .. tostring(k) .. "]"
end

-- A table's keys in the canonical order, or nil and a problem.
local function canonical_keys(t)
  local numbers, strings = {}, {}
  for k in pairs(t) do
    local kind = type(k)
    if kind == "number" then
      numbers[#numbers + 1] = k
    elseif kind == "string" then
      strings[#strings + 1] = k
    else
      return nil, string.format("table keys must be numbers or strings (every rank walks them sorted), got a %s key %s",
                                kind, tostring(k))
    end
  end
  table.sort(numbers)
  table.sort(strings)
  for _, k in ipairs(strings) do numbers[#numbers + 1] = k end
  return numbers
end

local is_tensor = core.is_tensor

-- Checks a value and lays out its structure: the keys of each table in
-- canonical order, the paths of its leaves ("predictions", "[2].loss") and
-- a description of the whole structure, equal on two ranks exactly when
-- they pair the same keys. Returns the layout, or nil and a problem.
local function layout(value)
  local keys_of, paths, parts = {}, {}, {}
  local problem
  local ancestors = {}
  local function visit(v, path)
    if problem then return end
    if type(v) == "number" or is_tensor(v) then
      paths[#paths + 1] = path == "" and "(the value)" or path
      parts[#parts + 1] = "T"
      return
    end
    if type(v) ~= "table" then
      problem = string.format("expected a tensor, a number or a table of them, got a %s%s", type(v),
                              path == "" and "" or (" at " .. path))
      return
    end
    if ancestors[v] then
      problem = "the table contains itself" .. (path == "" and "" or (" at " .. path))
      return
    end
    local keys, why = canonical_keys(v)
    if not keys then
      problem = why .. (path == "" and "" or (" in " .. path))
      return
    end
    ancestors[v] = true
    keys_of[v] = keys
    parts[#parts + 1] = "{"
    for _, k in ipairs(keys) do
      local text = key_text(k, path == "")
      parts[#parts + 1] = text .. "="
      visit(v[k], path .. text)
      parts[#parts + 1] = ","
    end
    parts[#parts + 1] = "}"
    ancestors[v] = nil
  end
  visit(value, "")
  if problem then return nil, problem end
  return { keys_of = keys_of, paths = paths, description = table.concat(parts) }
end

-- 32-bit FNV-1a of a string, the same on every rank.
local function hash(text)
  local h = 2166136261
  for i = 1, #text do
    h = bit.bxor(h, text:byte(i))
    h = bit.tobit(bit.lshift(h, 24) + h * 403)  -- h * 16777619 without losing bits
  end
  return h
end

local function key_list(paths)
  local shown = {}
  for i = 1, math.min(#paths, 24) do shown[i] = paths[i] end
  if #paths > 24 then shown[#shown + 1] = string.format("... (%d keys)", #paths) end
  return "{" .. table.concat(shown, ", ") .. "}"
end

-- The --debug message for ranks that passed different structures; `all`
-- holds every rank's {description, paths, problem}.
local function mismatch_message(what, all)
  local groups, order = {}, {}
  for r, d in ipairs(all) do
    local key = d.problem and ("!" .. d.problem) or d.description
    if not groups[key] then
      groups[key] = { ranks = {}, info = d }
      order[#order + 1] = key
    end
    table.insert(groups[key].ranks, r - 1)
  end
  local lines = {}
  for _, key in ipairs(order) do
    local g = groups[key]
    local text
    if g.info.problem then
      text = "an invalid value: " .. g.info.problem
    else
      text = "keys " .. key_list(g.info.paths)
    end
    lines[#lines + 1] = rank_list(g.ranks) .. " passed " .. text
  end
  -- The keys some ranks have and others lack.
  local holders, valid = {}, 0
  for r, d in ipairs(all) do
    if not d.problem then
      valid = valid + 1
      for _, path in ipairs(d.paths) do
        holders[path] = holders[path] or {}
        table.insert(holders[path], r - 1)
      end
    end
  end
  local uneven = {}
  for path, ranks in pairs(holders) do
    if #ranks < valid then uneven[#uneven + 1] = { path, ranks } end
  end
  table.sort(uneven, function(a, b) return a[1] < b[1] end)
  local message = string.format("%s: the ranks passed tables with different keys: %s", what,
                                table.concat(lines, "; "))
  if #uneven > 0 then
    local parts = {}
    for i = 1, math.min(#uneven, 24) do
      parts[i] = string.format("'%s' only on %s", uneven[i][1], rank_list(uneven[i][2]))
    end
    message = message .. " (" .. table.concat(parts, ", ") .. ")"
  end
  return message .. " (checked because of --debug)"
end

-- --debug: every rank learns whether all passed the same structure, and all
-- fail together when not.
local function check_same_structure(world, what, plan, problem)
  local mine = plan and plan.description or ("!" .. problem)
  local digest = core.tensor({ hash(mine), #mine }, { dtype = "float64" })
  local agree = true
  for _, part in ipairs(dist.all_gather(digest)) do
    local theirs = part:totable()
    if theirs[1] ~= hash(mine) or theirs[2] ~= #mine then agree = false end
  end
  if agree then return end
  local all = gathering.gather_object(world, { description = plan and plan.description, paths = plan and plan.paths,
                                     problem = problem })
  guard.raise_together(mismatch_message(what, all))
end

-- Applies fn(tensor, path) to every tensor of a value (numbers become
-- tensors; tables are walked in the canonical key order), keeping the table
-- structure. `world` defaults to this process's. The --debug exchange is for
-- tables only: a lone tensor goes straight to its collective, whose shape
-- the engine's --debug check compares (and a rank passing a table where
-- another passes a tensor is caught there as a different collective).
-- A value's own fault (a key of another type) is raised on every rank and
-- can be caught when the ranks have compared their values' structure
-- (--debug) or there is one rank; otherwise other ranks may have passed
-- good values and be waiting, so it ends the rank (collective_guard.lua),
-- as any error once the collectives have begun does.
local function map_tensors(value, fn, what, world)
  local plan, problem = layout(value)
  world = world or { rank = dist.state().rank, size = dist.state().world_size }
  local compared = gathering.debug and type(value) == "table" and world.size > 1
  if compared then check_same_structure(world, what, plan, problem) end
  if not plan then
    local message = what .. ": " .. problem
    if compared or world.size == 1 then guard.raise_together(message) end
    guard(world, args.error, message)
  end
  local keys_of, leaf = plan.keys_of, 0
  local function apply(v)
    if type(v) == "number" then v = core.tensor(v) end
    if type(v) ~= "table" then
      leaf = leaf + 1
      return fn(v, plan.paths[leaf])
    end
    local out = {}
    for _, k in ipairs(keys_of[v]) do out[k] = apply(v[k]) end
    return out
  end
  return guard(world, apply, value)
end
gathering.map_tensors = map_tensors

local function rows_first(t)
  return t:dim() == 0 and t:view(1) or t
end

-- Every rank's size along dim `d`, as a Lua list in rank order.
local function sizes_along_list(t, d)
  local out = {}
  for r, part in ipairs(dist.all_gather(core.tensor({ t:size(d) }, { dtype = "int64" }))) do out[r] = part:item() end
  return out
end

function gathering.gather(world, value)
  return map_tensors(value, function(t)
    if world.size == 1 then return rows_first(t) end
    local parts = dist.all_gather(t:contiguous())
    if t:dim() == 0 then return core.stack(parts, 1) end
    return core.cat(parts, 1)
  end, "gather", world)
end

local function pad_to(t, d, size, pad_index, pad_first)
  local have = t:size(d)
  if have == size then return t end
  local shape = t:size()
  shape[d] = size
  local padded = core.full(shape, pad_index, { dtype = t.dtype })
  padded:narrow(d, pad_first and (size - have + 1) or 1, have):copy_(t)
  return padded
end

-- Every rank's shape of `t`, as a list in rank order of {ndim, sizes}:
-- one fixed-size all_gather, so ranks whose tensors differ in their number
-- of dims still meet (sizes beyond the first SHAPE_SLOTS - 1 dims are not
-- exchanged).
local SHAPE_SLOTS = 32
local function shapes_of_all(t)
  local size, row = t:size(), { t:dim() }
  for i = 1, SHAPE_SLOTS - 1 do row[i + 1] = size[i] or -1 end
  local out = {}
  for r, part in ipairs(dist.all_gather(core.tensor(row, { dtype = "float64" }))) do
    local values = part:totable()
    local shape = {}
    for i = 1, math.min(values[1], SHAPE_SLOTS - 1) do shape[i] = values[i + 1] end
    out[r] = { ndim = values[1], sizes = shape }
  end
  return out
end

local function shape_text(s)
  local text = "[" .. table.concat(s.sizes, ", ")
  if s.ndim > #s.sizes then text = text .. ", ..." end
  return text .. "]"
end

-- Pads every rank's tensor along `dim` to the largest size over ranks.
-- The ranks exchange whole shapes: tensors of different numbers of dims
-- are an error on every rank. A dim beyond the tensors' last leaves them
-- as they are, as in Accelerate.
function gathering.pad_across_processes(world, value, options)
  local o = args.options("pad_across_processes", options, { dim = 1, pad_index = 0, pad_first = false })
  if type(o.dim) ~= "number" or o.dim % 1 ~= 0 or o.dim == 0 then
    args.error("pad_across_processes: dim must be a non-zero integer (1-based, -1 the last), got " .. tostring(o.dim))
  end
  if type(o.pad_index) ~= "number" then
    args.error("pad_across_processes: pad_index must be a number, got a " .. type(o.pad_index))
  end
  if type(o.pad_first) ~= "boolean" then
    args.error("pad_across_processes: pad_first must be a boolean, got a " .. type(o.pad_first))
  end
  return map_tensors(value, function(t, path)
    if world.size == 1 then return t end
    local what = path == "(the value)" and "pad_across_processes" or ("pad_across_processes of " .. path)
    local shapes = shapes_of_all(t)
    local ndim = shapes[1].ndim
    for r = 2, world.size do
      if shapes[r].ndim ~= ndim then
        local parts = {}
        for q = 1, world.size do
          parts[q] = string.format("rank %d passed %s (%d dims)", q - 1, shape_text(shapes[q]), shapes[q].ndim)
        end
        guard.raise_together(string.format("%s: the ranks passed tensors with different numbers of dims: %s",
                                           what, table.concat(parts, ", ")))
      end
    end
    local d = o.dim
    if d < 0 then d = ndim + d + 1 end
    if d < 1 then
      guard.raise_together(string.format("%s: dim %d is out of range for tensors of %d dims", what, o.dim, ndim))
    end
    if d > ndim then return t end
    local largest = 0
    for r = 1, world.size do largest = math.max(largest, shapes[r].sizes[d] or t:size(d)) end
    return pad_to(t, d, largest, o.pad_index, o.pad_first)
  end, "pad_across_processes", world)
end

-- Gathers along dim 1, dropping each rank's padding rows (`padding[r + 1]`
-- rows at the tail of rank r's part) and coping with ranks holding
-- different numbers of rows.
function gathering.gather_for_metrics(world, value, padding)
  return map_tensors(value, function(t)
    t = rows_first(t)
    if world.size == 1 then
      local drop = padding and padding[1] or 0
      return drop > 0 and t:narrow(1, 1, t:size(1) - drop) or t
    end
    local rows = sizes_along_list(t, 1)
    local largest = math.max(unpack(rows))
    local parts = dist.all_gather(pad_to(t:contiguous(), 1, largest, 0, false))
    local kept = {}
    for r = 1, world.size do
      local keep = rows[r] - (padding and padding[r] or 0)
      if keep > 0 then kept[#kept + 1] = parts[r]:narrow(1, 1, keep) end
    end
    if #kept == 0 then return t:narrow(1, 1, 0) end
    return core.cat(kept, 1)
  end, "gather_for_metrics", world)
end

-- Any serialisable Lua value from every rank, as a list in rank order.
function gathering.gather_object(world, value)
  if world.size == 1 then return { value } end
  local bytes = dist.string_to_bytes(serialize.dump(value))
  local lengths = sizes_along_list(bytes, 1)
  local parts = dist.all_gather(pad_to(bytes, 1, math.max(unpack(lengths)), 0, false))
  local out = {}
  for r = 1, world.size do
    out[r] = serialize.load(dist.bytes_to_string(parts[r]:narrow(1, 1, lengths[r])),
                            string.format("gather_object: the value of rank %d", r - 1))
  end
  return out
end

-- Reduces every tensor across ranks, as Accelerate's reduce does: "sum",
-- "mean", "max" or "min" ("none" sums too, as there), then multiplies by
-- `scale` (default 1). Returns copies; the inputs are left alone.
local reductions = { sum = "sum", mean = "sum", max = "max", min = "min", none = "sum" }

function gathering.reduce(world, value, op, scale)
  op = op or "sum"
  if not reductions[op] then
    args.error("reduce: op must be 'sum', 'mean', 'max', 'min' or 'none', got '" .. tostring(op) .. "'")
  end
  if scale ~= nil and type(scale) ~= "number" then
    args.error("reduce: scale must be a number, got a " .. type(scale))
  end
  return map_tensors(value, function(t)
    local copy = t:detach():clone():contiguous()
    if world.size > 1 then dist.all_reduce(copy, reductions[op]) end
    if op == "mean" then copy = copy / world.size end
    if scale and scale ~= 1 then copy = copy * scale end
    return copy
  end, "reduce", world)
end

-- A copy of rank `from`'s value on every rank.
function gathering.broadcast(world, value, from)
  from = from or 0
  return map_tensors(value, function(t)
    local copy = t:detach():clone():contiguous()
    if world.size > 1 then dist.broadcast(copy, from) end
    return copy
  end, "broadcast", world)
end

-- This rank's contiguous share of a list, a tensor (by rows), a data set
-- (a table with __len and get: a Subset of it) or a table of those (split
-- alike, each value the same length): sizes differ by at most one, the
-- first ranks taking the extra. A share may be empty (fewer items than
-- ranks). With apply_padding, shorter shares repeat the input's last
-- element so every rank gets as many, as Accelerate does.
local function is_dataset(value)
  local mt = type(value) == "table" and getmetatable(value)
  return mt and type(mt.__len) == "function" and type(value.get) == "function" or false
end

local function length_of(value, key)
  if type(value) == "userdata" and value.dtype then
    if value:dim() == 0 then
      args.error("split_between_processes: cannot split a 0-dim tensor" .. key)
    end
    return value:size(1)
  end
  if is_dataset(value) then return dataset.length(value) end
  if type(value) == "table" then return #value end
  args.error("split_between_processes: expected a list, a tensor, a data set or a table of them, got a "
             .. type(value) .. key)
end

local function split_one(value, n, start, count, longest, padded)
  if type(value) == "userdata" then
    -- An empty share is 0 rows taken from the start (narrow refuses a start
    -- past the end, even for 0 rows).
    local part = value
    if count > 0 then part = value:narrow(1, start + 1, count) elseif n > 0 then part = value:narrow(1, 1, 0) end
    if padded and count < longest then
      local last = value:narrow(1, n, 1)
      part = core.cat({ part, last:expand(longest - count, unpack(value:size(), 2)) }, 1)
    end
    return part
  end
  local indices = {}
  for i = 1, count do indices[i] = start + i end
  if padded then
    for i = count + 1, longest do indices[i] = n end
  end
  if is_dataset(value) then return Subset(value, indices) end
  local out = {}
  for i, index in ipairs(indices) do out[i] = value[index] end
  return out
end

function gathering.split_between_processes(world, value, options)
  local padded = args.options("split_between_processes", options, { apply_padding = false }).apply_padding
  local nested = type(value) == "table" and not is_dataset(value) and value[1] == nil and next(value) ~= nil
  local n
  if nested then  -- a table of lists, tensors or data sets, split alike
    local keys = {}
    for k in pairs(value) do keys[#keys + 1] = k end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    for _, k in ipairs(keys) do
      local len = length_of(value[k], " under key '" .. tostring(k) .. "'")
      n = n or len
      if len ~= n then
        args.error(string.format("split_between_processes: every value must have the same length; '%s' has %d, "
                                 .. "'%s' has %d", tostring(keys[1]), n, tostring(k), len))
      end
    end
  else
    n = length_of(value, "")
  end
  if padded and n == 0 then
    args.error("split_between_processes: apply_padding needs at least one element to repeat")
  end
  local base, extra = math.floor(n / world.size), n % world.size
  local r = world.rank
  local start = r * base + math.min(r, extra)
  local count = base + (r < extra and 1 or 0)
  local longest = base + (extra > 0 and 1 or 0)
  return guard(world, function()
    if not nested then return split_one(value, n, start, count, longest, padded) end
    local out = {}
    for k, v in pairs(value) do out[k] = split_one(v, n, start, count, longest, padded) end
    return out
  end)
end

return gathering
