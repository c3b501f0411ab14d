-- Token rows for fine-tuning, from examples already tokenized: each example
-- is {ids = {...}, labels = {...}} (Lua lists, ids 0-based, -100 where the
-- loss skips a token). TokenizedDataset makes the examples; here they are
-- cut and laid out as int64 tensors.
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
  local width = 0
  for _, e in ipairs(examples) do width = math.max(width, math.min(#e.ids, max_length)) end
  local out_ids, out_mask, out_labels = {}, {}, {}
  for i, e in ipairs(examples) do
    local n = math.min(#e.ids, max_length)
    local r_ids, r_mask, r_labels = {}, {}, {}
    local offset = side == "left" and width - n or 0
    for j = 1, width do
      local k = j - offset
      local inside = k >= 1 and k <= n
      r_ids[j], r_mask[j], r_labels[j] = inside and e.ids[k] or pad_id, inside and 1 or 0, inside and e.labels[k] or -100
    end
    out_ids[i], out_mask[i], out_labels[i] = r_ids, r_mask, r_labels
  end
  return core.tensor(out_ids, { dtype = "int64" }), core.tensor(out_mask, { dtype = "int64" }),
         core.tensor(out_labels, { dtype = "int64" })
end

-- Best-fit decreasing (TRL's "bfd"): longest first, each into the row whose
-- free space is the smallest that holds it (the row that reached that space
-- first among equals), a new row when none does. Returns lists of example
-- indices, one a row.
local function best_fit_decreasing(examples, max_length)
  local order = {}
  for i = 1, #examples do order[i] = i end
  table.sort(order, function(a, b)
    local la, lb = #examples[a].ids, #examples[b].ids
    if la ~= lb then return la > lb end
    return a < b
  end)
  local bins, by_space = {}, {}  -- by_space[s]: a queue of the rows with s tokens free
  for _, i in ipairs(order) do
    local n = #examples[i].ids
    local bin
    for s = n, max_length - 1 do
      local queue = by_space[s]
      if queue and queue.first <= queue.last then
        bin = queue[queue.first]
        queue[queue.first], queue.first = nil, queue.first + 1
        break
      end
    end
    if not bin then
      bin = { members = {}, space = max_length }
      bins[#bins + 1] = bin
    end
    bin.members[#bin.members + 1] = i
    bin.space = bin.space - n
    if bin.space > 0 then
      local queue = by_space[bin.space] or { first = 1, last = 0 }
      by_space[bin.space] = queue
      queue.last = queue.last + 1
      queue[queue.last] = bin
    end
  end
  local rows = {}
  for r, bin in ipairs(bins) do rows[r] = bin.members end
  return rows
end

-- Flat lists of one row: ids, mask, labels, positions, from its pieces.
local function row_builder(max_length, pad_id)
  local row = { ids = {}, mask = {}, labels = {}, positions = {} }
  function row.add(ids, labels, from, to)
    for j = from, to do
      local k = #row.ids + 1
      local position = j - from
      row.ids[k], row.mask[k], row.positions[k] = ids[j], 1, position
      row.labels[k] = position == 0 and -100 or labels[j]
    end
  end
  -- Padding: one-token documents (position 0) the mask hides.
  function row.finish()
    for k = #row.ids + 1, max_length do
      row.ids[k], row.mask[k], row.labels[k], row.positions[k] = pad_id, 0, -100, 0
    end
    return row
  end
  return row
end

local function as_tensors(rows, max_length)
  local ids, mask, labels, positions = {}, {}, {}, {}
  for r, row in ipairs(rows) do ids[r], mask[r], labels[r], positions[r] = row.ids, row.mask, row.labels, row.positions end
  local function matrix(t) return core.tensor(t, { dtype = "int64" }):view(#rows, max_length) end
  return matrix(ids), matrix(mask), matrix(labels), matrix(positions)
end

-- strategy "bfd": whole examples (cut to max_length, keeping their start),
-- best-fit decreasing into rows, padded; "wrapped": every example's tokens
-- one after another, cut into rows of exactly max_length (the rest dropped,
-- as transformers' run_clm), an example cut by a row's end continuing at
-- position 0 in the next. Returns nil when no row is made.
function training_rows.pack(examples, max_length, strategy, pad_id)
  local rows = {}
  if strategy == "bfd" then
    for r, members in ipairs(best_fit_decreasing(examples, max_length)) do
      local row = row_builder(max_length, pad_id)
      for _, i in ipairs(members) do
        local e = examples[i]
        row.add(e.ids, e.labels, 1, math.min(#e.ids, max_length))
      end
      rows[r] = row.finish()
    end
  else
    local row = row_builder(max_length)
    for _, e in ipairs(examples) do
      local from = 1
      while from <= #e.ids do
        local to = math.min(#e.ids, from + max_length - #row.ids - 1)
        row.add(e.ids, e.labels, from, to)
        from = to + 1
        if #row.ids == max_length then
          rows[#rows + 1] = row
          row = row_builder(max_length)
        end
      end
    end
  end
  if #rows == 0 then return nil end
  return as_tensors(rows, max_length)
end

return training_rows
