-- Token rows for fine-tuning, from examples already tokenized: each example
-- is {ids = {...}, labels = {...}} (Lua lists, ids 0-based, -100 where the
-- loss skips a token). TokenizedDataset makes the examples; here they are
-- cut, and laid out as int64 tensors in C++ (engine/tokenizers/training_rows.h).
--   truncate(example, max_length, mode)  keep_start / keep_end, TRL's truncation_mode
--   pad(examples, max_length, pad_id, side) -> input_ids, attention_mask, labels [N, W]
--   pack(examples, max_length, strategy, pad_id)
--     -> input_ids, attention_mask, labels, position_ids [N, max_length]
-- Packed rows carry each document's positions from 0, which the models read
-- as document boundaries (attention never crosses one: accel.models'
-- attention_mask.documents, and ring attention under context parallelism),
-- and -100 on the label of each document's first token, as TRL's
-- padding-free collator sets it: no token learns to predict another
-- document's start.
local core = require("accel.core")

local training_rows = {}

function training_rows.truncate(example, max_length, mode)
  local n = #example.ids
  if n <= max_length then return example end
  local first = mode == "keep_end" and n - max_length + 1 or 1
  local ids, labels = {}, {}
  for j = 1, max_length do ids[j], labels[j] = example.ids[first + j - 1], example.labels[first + j - 1] end
  return { ids = ids, labels = labels }
end

-- Padded to the longest (pad id, label -100, mask 0 on `side`).
function training_rows.pad(examples, max_length, pad_id, side)
  return core.tokenizers.training_rows(examples, max_length, "pad", pad_id, side == "left")
end

-- strategy "bfd" or "wrapped" (engine/tokenizers/training_rows.h says how
-- each fills its rows). Returns nil when no row is made.
function training_rows.pack(examples, max_length, strategy, pad_id)
  local ids, mask, labels, positions = core.tokenizers.training_rows(examples, max_length, strategy, pad_id, false)
  if ids:size(1) == 0 then return nil end
  return ids, mask, labels, positions
end

return training_rows
