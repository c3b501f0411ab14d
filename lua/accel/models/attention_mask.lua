-- Additive attention masks. A decoder's: (B, 1, T, S) in the activations'
-- dtype, 0 where query i (at absolute position past + i) may see key j and
-- the dtype's lowest number elsewhere, as transformers builds it, so that a
-- row with no visible key (a left-padding position) attends uniformly rather
-- than producing NaN. A key is visible when it is not later than the query,
-- not padding (attention_mask 1), with a sliding window of W fewer than W
-- positions back, and, in a packed row (documents), of the query's document.
local core = require("accel.core")

local attention_mask = {}

local lowest = {
  float32 = -3.4028234663852886e38,
  float64 = -1.7976931348623157e308,
  float16 = -65504,
  bfloat16 = -3.3895313892515355e38,
}

-- mask: (B, past + T) of 1/0 or nil (no padding); options.documents: (B, T)
-- from attention_mask.documents, or nil. Returns nil when every key is
-- visible to every query (one new token, no padding, no window).
function attention_mask.causal(mask, batch, T, past, options)
  local window, documents = options.sliding_window, options.documents
  local S = past + T
  if T == 1 and not mask and not (window and S > window) then return nil end
  local device = options.device
  local query = core.arange(past, S, { dtype = "int64", device = device }):view(T, 1)
  local key = core.arange(0, S, { dtype = "int64", device = device }):view(1, S)
  local visible = key:le(query)
  if window then visible = visible:logical_and(key:gt(query - window)) end
  visible = visible:view(1, 1, T, S)
  if mask then visible = visible:logical_and(mask:view(batch, 1, 1, S):bool()) end
  if documents then visible = visible:logical_and(documents:view(batch, 1, T, 1):eq(documents:view(batch, 1, 1, T))) end
  local shape = { (mask or documents) and batch or 1, 1, T, S }
  return core.zeros(shape, { dtype = options.dtype, device = device })
      :masked_fill_(visible:logical_not(), lowest[options.dtype] or lowest.float32)
end

-- The documents of packed rows (padding-free batches, as TRL's
-- padding_free collator and TokenizedDataset's packing give them): where
-- position_ids do not count up by one from the previous token a new
-- document starts, and attention never crosses into another (transformers'
-- find_packed_sequence_indices, flash attention's varlen boundaries). Read
-- from explicit position_ids in a call without a cache (training, scoring);
-- unlike transformers, also beside an attention_mask, which then hides
-- padding as well (transformers' sdpa path ignores the restarts then and
-- lets documents see each other). Returns (B, T) int64, each row's document
-- index from 0, or nil when every row is one document.
function attention_mask.documents(position_ids, cache, batch)
  if position_ids == nil or cache ~= nil or position_ids:size(2) < 2 then return nil end
  local positions = position_ids:expand(batch, position_ids:size(2))
  local T = positions:size(2)
  local starts = (positions:narrow(2, 2, T - 1) - positions:narrow(2, 1, T - 1)):ne(1):long()
  local documents = core.cat({ core.zeros({ batch, 1 }, { dtype = "int64", device = positions.device }),
                               starts:cumsum(-1) }, 2)
  if documents:select(2, T):eq(0):all():item() then return nil end
  return documents
end

-- An encoder's additive mask (B, 1, 1, S) hiding the padding keys (mask 0),
-- or nil without a mask.
function attention_mask.padding(mask, dtype, device)
  if mask == nil then return nil end
  local B, S = mask:size(1), mask:size(2)
  return core.zeros({ B, 1, 1, S }, { dtype = dtype, device = device })
      :masked_fill_(mask:to(device):view(B, 1, 1, S):eq(0), lowest[dtype] or lowest.float32)
end

-- Positions from a left-padded mask, as generate computes them: each row
-- counts its real tokens from 0; padding gets 1.
function attention_mask.positions(mask)
  local long = mask:long()
  return (long:cumsum(-1) - 1):masked_fill(long:eq(0), 1)
end

return attention_mask
