-- Collectives on tensors and Lua values, for the Accelerator: gather,
-- gather_for_metrics, pad_across_processes, gather_object, reduce,
-- broadcast, split_between_processes. Each takes the world (rank, size)
-- explicitly, so it is testable and holds no state.
local core = require("accel.core")
local serialize = require("accel.serialize")

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

function gathering.reduce(world, value, op)
  op = op or "sum"
  if op ~= "sum" and op ~= "mean" then
    error("reduce: op must be 'sum' or 'mean', got '" .. tostring(op) .. "'", 3)
  end
  return map_tensors(value, function(t)
    local copy = t:detach():clone():contiguous()
    if world.size > 1 then dist.all_reduce(copy, op) end
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

-- This rank's contiguous share of a list, a tensor (by rows) or a table of
-- tensors: sizes differ by at most one, the first ranks taking the extra.
-- With apply_padding, shorter shares repeat their last element so every
-- rank gets as many.
function gathering.split_between_processes(world, value, options)
  local padded = options and options.apply_padding
  local function share(n)
    local base, extra = math.floor(n / world.size), n % world.size
    local r = world.rank
    return r * base + math.min(r, extra), base + (r < extra and 1 or 0), base + (extra > 0 and 1 or 0)
  end
  local function split_tensor(t)
    local start, count, longest = share(t:size(1))
    local part = t:narrow(1, start + 1, count)
    if padded and count < longest and count > 0 then
      part = core.cat({ part, part:narrow(1, count, 1):expand(longest - count, unpack(t:size(), 2)) }, 1)
    end
    return part
  end
  if type(value) == "userdata" then return split_tensor(value) end
  if type(value) ~= "table" then
    error("split_between_processes: expected a list, a tensor or a table of tensors, got a " .. type(value), 2)
  end
  if value[1] == nil and next(value) ~= nil then  -- a table of tensors, split alike
    local out = {}
    for k, t in pairs(value) do out[k] = split_tensor(t) end
    return out
  end
  local start, count, longest = share(#value)
  local out = {}
  for i = 1, count do out[i] = value[start + i] end
  if padded and count > 0 then
    for i = count + 1, longest do out[i] = out[count] end
  end
  return out
end

return gathering
