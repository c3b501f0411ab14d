-- dispatch_batches: the main process reads each round of batches (every
-- rank's batch of one step) and sends it; the other ranks never read the
-- data. Per round, a header (a serialised Lua value: padding, whether it is
-- the epoch's last round, each rank's batch with its tensors replaced by
-- numbered placeholders, the joined tensors' shapes and dtypes and each
-- rank's rows) is broadcast, then every joined tensor (all ranks' rows
-- concatenated along dim 1); each rank narrows its rows.
local core = require("accel.core")
local sorted_keys = require("accel.util.sorted_keys")
local serialize = require("accel.util.serialize")

local dist = core.dist
local PLACEHOLDER = "__dispatched_tensor"

local is_tensor = core.is_tensor


-- The value with its tensors (appended to `tensors`) replaced by placeholders.
local function strip(value, tensors)
  if is_tensor(value) then
    if value:dim() == 0 then
      error("dispatch_batches: a batch holds a 0-dim tensor; batches are sent by rows", 0)
    end
    tensors[#tensors + 1] = value:contiguous()
    return { [PLACEHOLDER] = #tensors }
  end
  if type(value) ~= "table" then return value end
  local out = {}
  for _, k in ipairs(sorted_keys(value)) do out[k] = strip(value[k], tensors) end
  return out
end

local function fill(skeleton, tensors)
  if type(skeleton) ~= "table" then return skeleton end
  if skeleton[PLACEHOLDER] then return tensors[skeleton[PLACEHOLDER]] end
  local out = {}
  for k, v in pairs(skeleton) do out[k] = fill(v, tensors) end
  return out
end

local function broadcast_value(value, is_main)
  local bytes = is_main and dist.string_to_bytes(serialize.dump(value))
  local length = core.tensor({ is_main and bytes:numel() or 0 }, { dtype = "int64" })
  dist.broadcast(length, 0)
  bytes = bytes or core.zeros({ length:item() }, { dtype = "uint8" })
  dist.broadcast(bytes, 0)
  return serialize.load(dist.bytes_to_string(bytes), "the dispatched batch's value from rank 0")
end

-- The main process: the header of `round` and its joined tensors.
local function pack(round, ahead, read_part, W)
  local header, joined = { last = ahead == nil, empty = round == nil, skeletons = {}, tensors = {} }, {}
  if not round then return header, joined end
  header.padding = round.padding
  local per_rank, count = {}, nil
  for r = 1, W do
    if round.parts[r] then
      per_rank[r] = {}
      header.skeletons[r] = strip(read_part(round.parts[r]), per_rank[r])
      if count and count ~= #per_rank[r] then
        error(string.format("dispatch_batches: rank %d's batch holds %d tensors, rank 0's %d", r - 1,
                            #per_rank[r], count), 0)
      end
      count = count or #per_rank[r]
    end
  end
  for j = 1, count or 0 do
    local pieces, rows = {}, {}
    for r = 1, W do
      local t = per_rank[r] and per_rank[r][j]
      rows[r] = t and t:size(1) or 0
      if t then pieces[#pieces + 1] = t end
    end
    joined[j] = #pieces == 1 and pieces[1] or core.cat(pieces, 1)
    header.tensors[j] = { shape = joined[j]:size(), dtype = joined[j].dtype, rows = rows }
  end
  return header, joined
end

local dispatcher = {}

-- A function giving this rank's next step ({values, padding}; values nil
-- when this rank has no batch in the round), nil after the epoch's last
-- round. make_rounds() -> next_round, read_part is called on the main process only.
function dispatcher.pull(loader, make_rounds)
  local W, rank = loader.world_size, loader.rank
  local is_main = rank == 0
  local next_round, read_part, ahead
  local ended = false
  return function()
    if ended then return nil end
    local header, joined
    if is_main then
      local round
      if next_round then
        round = ahead
      else
        next_round, read_part = make_rounds()
        round = next_round()
      end
      ahead = round and next_round()
      header, joined = pack(round, ahead, read_part, W)
    end
    header = broadcast_value(header, is_main)
    ended = header.last
    if header.empty then return nil end
    local mine = {}
    for j, meta in ipairs(header.tensors) do
      local t = is_main and joined[j] or core.zeros(meta.shape, { dtype = meta.dtype })
      dist.broadcast(t, 0)
      local offset = 0
      for r = 1, rank do offset = offset + meta.rows[r] end
      if meta.rows[rank + 1] > 0 then mine[j] = t:narrow(1, offset + 1, meta.rows[rank + 1]) end
    end
    local skeleton = header.skeletons[rank + 1]
    return { values = skeleton and fill(skeleton, mine), padding = header.padding }
  end
end

return dispatcher
