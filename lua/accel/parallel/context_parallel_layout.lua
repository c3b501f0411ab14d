-- Context parallelism's load-balanced layout of a sequence over the mesh's
-- cp dim (Megatron-LM's and torchtitan's): the sequence is cut in
-- 2 x cp_size chunks and cp rank r holds chunks r and 2 x cp_size - 1 - r,
-- in that order, so that under causal attention every rank has the same work
-- (an early chunk sees few keys, its partner many). Ring attention
-- (engine/parallel/ring_attention.h) relies on it.
--   split(batch, mesh) -> this rank's part of a batch: input_ids,
--     position_ids (the tokens' positions in the whole sequence), shift_labels
--   part(t, mesh [, dim]) -> this rank's part of one tensor along dim (default 2)
--   gather(t, mesh [, dim]) -> the whole sequence from every cp rank's part
local core = require("accel.core")
local args = require("accel.util.args")

local layout = {}

local known = { input_ids = true, labels = true, shift_labels = true, position_ids = true, attention_mask = true }

-- The two chunks of this cp rank, 1-based first positions along a sequence
-- of `length`, and the chunk length; refuses a length that does not cut
-- into 2 x cp_size chunks.
local function chunks(length, cp, where)
  local pieces = 2 * cp.size
  if length % pieces ~= 0 then
    args.error(string.format("%s: the sequence length %d is not divisible by 2 x cp_size = %d (cp_size %d): "
                             .. "each cp rank holds 2 of %d equal chunks; pad the sequences to a multiple of %d",
                             where, length, pieces, cp.size, pieces, pieces))
  end
  local size = length / pieces
  return cp.rank * size + 1, (pieces - 1 - cp.rank) * size + 1, size
end

-- This rank's part of `t` along `dim`: its two chunks, joined.
local function local_part(t, dim, cp, where)
  local first, second, size = chunks(t:size(dim), cp, where)
  return core.cat({ t:narrow(dim, first, size), t:narrow(dim, second, size) }, dim)
end

-- Packed rows (several documents one after another) go over the ring by
-- their position_ids: ring attention names each token's document by where
-- its position 0 falls in the row, so a new document must restart its
-- positions (at 0, or anywhere not above the previous token's); one that
-- jumps up would name an earlier document's start.
local function check_documents(positions, where)
  local T = positions:size(2)
  if T < 2 then return end
  local rise = positions:narrow(2, 2, T - 1) - positions:narrow(2, 1, T - 1)
  local jumps = rise:gt(1)
  if jumps:any():item() then
    local at = jumps:reshape(-1):nonzero():view(-1)[1]:item() - 1  -- nonzero's indices are 1-based
    local row, col = math.floor(at / (T - 1)), at % (T - 1)
    args.error(string.format("%s: position_ids jump from %d to %d between tokens %d and %d of row %d: a packed "
                             .. "row's documents each restart their positions (at 0), and positions within one "
                             .. "count up by one", where, positions[row + 1][col + 1]:item(),
                             positions[row + 1][col + 2]:item(), col + 1, col + 2, row + 1))
  end
end

function layout.part(t, mesh, dim)
  return local_part(t, dim or 2, mesh.cp, "accel.parallel.context_parallel_part")
end

-- batch: {input_ids = (B, T), labels = (B, T) as model{labels} takes them
-- (the next token's label at each position comes from position t + 1, so
-- they are shifted here, before splitting: -100 closes each row), or
-- shift_labels (already shifted), position_ids (default 0 .. T - 1),
-- attention_mask (ones only: padding is not supported)}. Returns
-- {input_ids, position_ids, shift_labels} of this cp rank, (B, 2T / (2 x cp_size)).
function layout.split(batch, mesh)
  local where = "accel.parallel.context_parallel_split"
  if type(batch) ~= "table" then args.error(where .. ": expected a table {input_ids = ..., labels = ...} as argument 1") end
  local cp = mesh and mesh.cp
  if not cp then args.error(where .. ": expected acc.mesh (a device mesh with a cp dim) as argument 2") end
  for key in pairs(batch) do
    if not known[key] then
      args.error(string.format("%s: unknown key '%s' (known: attention_mask, input_ids, labels, position_ids, "
                               .. "shift_labels)", where, tostring(key)))
    end
  end
  local ids = batch.input_ids
  if type(ids) ~= "userdata" or ids:dim() ~= 2 then
    args.error(where .. ": input_ids must be a (batch, sequence) tensor, got "
               .. (type(ids) == "userdata" and args.shape(ids) or type(ids)))
  end
  local B, T = ids:size(1), ids:size(2)
  local function same_shape(key)
    local t = batch[key]
    if t ~= nil and (type(t) ~= "userdata" or t:dim() ~= 2 or t:size(1) ~= B or t:size(2) ~= T) then
      args.error(string.format("%s: %s must have the shape of input_ids (%d, %d), got %s", where, key, B, T,
                               type(t) == "userdata" and args.shape(t) or type(t)))
    end
    return t
  end
  if batch.labels ~= nil and batch.shift_labels ~= nil then
    args.error(where .. ": give labels (shifted here) or shift_labels (already shifted), not both")
  end
  local mask = same_shape("attention_mask")
  if mask ~= nil and mask:eq(0):any():item() then
    args.error(where .. ": attention_mask has padding (zeros); context parallelism takes whole sequences only")
  end
  local positions = same_shape("position_ids")
  if positions then
    check_documents(positions, where)
  else
    positions = core.arange(0, T, { dtype = "int64", device = ids.device }):view(1, T):expand(B, T)
  end
  local shifted = same_shape("shift_labels")
  local labels = same_shape("labels")
  if labels then
    shifted = core.cat({ labels:narrow(2, 2, T - 1), core.full({ B, 1 }, -100, { dtype = labels.dtype,
                                                                               device = labels.device }) }, 2)
  end
  local out = { input_ids = local_part(ids, 2, cp, where), position_ids = local_part(positions, 2, cp, where) }
  if shifted then out.shift_labels = local_part(shifted, 2, cp, where) end
  return out
end

-- The inverse of split for one tensor: every cp rank's part of a sequence
-- along `dim` (default 2), gathered over cp and put back in order.
function layout.gather(t, mesh, dim)
  local cp = mesh.cp
  dim = dim or 2
  local parts = cp:all_gather(t:contiguous())
  local size = t:size(dim) / 2
  local ordered = {}
  for r = 0, cp.size - 1 do
    ordered[r + 1] = parts[r + 1]:narrow(dim, 1, size)
    ordered[2 * cp.size - r] = parts[r + 1]:narrow(dim, size + 1, size)
  end
  return core.cat(ordered, dim)
end

return layout
