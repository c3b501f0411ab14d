-- Collectives on tensors and Lua values, for the Accelerator: gather,
-- gather_for_metrics, pad_across_processes, gather_object, reduce,
-- broadcast, split_between_processes. Each takes the world (rank, size)
-- explicitly, so it is testable and holds no state.
local core = require("accel.core")
local serialize = require("accel.serialize")
local guard = require("accel.collective_guard")
local args = require("accel.nn.args")
local dataset = require("accel.data.dataset")
local Subset = require("accel.data.subset")

local dist = core.dist
local gathering = {}

-- Applies fn to every tensor of a value (numbers become tensors; tables are
-- walked), keeping the table structure.
local function map_tensors(value, fn, what)
  if type(value) == "number" then return fn(core.tensor(value)) end
  if type(value) == "table" then
    local out = {}
    for k, v in pairs(value) do out[k] = map_tensors(v, fn, what) end
    return out
  end
  if type(value) ~= "userdata" or not value.dtype then
    error(what .. ": expected a tensor, a number or a table of them, got a " .. type(value), 3)
  end
  return fn(value)
end
gathering.map_tensors = map_tensors

local function rows_first(t)
  return t:dim() == 0 and t:view(1) or t
end

-- Every rank's size along dim `d`, as a Lua list in rank order.
local function sizes_along_list(t, d)
  local out = {}
  for r, part in ipairs(dist.all_gather(core.tensor({ t:size(d) }))) do out[r] = part:item() end
  return out
end

function gathering.gather(world, value)
  return map_tensors(value, function(t)
    if world.size == 1 then return rows_first(t) end
    local parts = dist.all_gather(t:contiguous())
    if t:dim() == 0 then return core.stack(parts, 1) end
    return core.cat(parts, 1)
  end, "gather")
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

-- Pads every rank's tensor along `dim` to the largest size over ranks.
function gathering.pad_across_processes(world, value, options)
  options = options or {}
  return map_tensors(value, function(t)
    if world.size == 1 then return t end
    local d = options.dim or 1
    if d < 0 then d = t:dim() + d + 1 end
    local largest = math.max(unpack(sizes_along_list(t, d)))
    return pad_to(t, d, largest, options.pad_index or 0, options.pad_first)
  end, "pad_across_processes")
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
  end, "gather_for_metrics")
end

-- Any serialisable Lua value from every rank, as a list in rank order.
function gathering.gather_object(world, value)
  if world.size == 1 then return { value } end
  local bytes = dist.string_to_bytes(serialize.dump(value))
  local lengths = sizes_along_list(bytes, 1)
  local parts = dist.all_gather(pad_to(bytes, 1, math.max(unpack(lengths)), 0, false))
  local out = {}
  for r = 1, world.size do
    out[r] = serialize.load(dist.bytes_to_string(parts[r]:narrow(1, 1, lengths[r])))
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
  return guard(world, map_tensors, value, function(t)
    local copy = t:detach():clone():contiguous()
    if world.size > 1 then dist.all_reduce(copy, reductions[op]) end
    if op == "mean" then copy = copy / world.size end
    if scale and scale ~= 1 then copy = copy * scale end
    return copy
  end, "reduce")
end

-- A copy of rank `from`'s value on every rank.
function gathering.broadcast(world, value, from)
  from = from or 0
  return map_tensors(value, function(t)
    local copy = t:detach():clone():contiguous()
    if world.size > 1 then dist.broadcast(copy, from) end
    return copy
  end, "broadcast")
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
