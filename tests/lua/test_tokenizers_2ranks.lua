-- nproc: 2
-- A TokenizedDataset on two ranks: the prepared DataLoader gives each rank
-- its share of the rows, and gathered they are the data set's rows, as one
-- process reads them (padded rows and packed rows).
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local tokenizers = accel.tokenizers

local acc = accel.Accelerator{}
local fixtures = arg[0]:match("(.*/)") .. "../tokenizers/fixtures"
local tok = tokenizers.from_pretrained(fixtures .. "/wordpiece")

-- Each rank writes the same records to a file of its own.
local path = os.tmpname() .. ".jsonl"
local f = assert(io.open(path, "wb"))
for i = 1, 13 do f:write(string.format('{"text": "record %d %s"}\n', i, string.rep("hello world ", i % 4))) end
f:close()

for _, options in ipairs({ { max_length = 8 }, { max_length = 5, packing = true } }) do
  local ds = tokenizers.TokenizedDataset(path, tok, options)
  local loader = acc:prepare(accel.data.DataLoader(ds, { batch_size = 2 }))
  local mine, all = 0, {}
  for input_ids, attention_mask, labels, position_ids in loader:iter() do
    mine = mine + input_ids:size(1)
    -- Packed rows learn no record's first token from the record before it:
    -- their label is -100 where a record starts (position 0).
    local hidden = attention_mask:eq(0)
    if position_ids then
      local starts = position_ids:eq(0)
      check.near(labels:masked_select(starts), accel.full({ starts:sum():item() }, -100), 0,
                 "packed labels are -100 where a record starts")
      hidden = hidden:logical_or(starts)
    end
    check.near(labels:masked_fill(hidden, 0), input_ids:masked_fill(hidden, 0), 0,
               "labels are the ids where the mask is 1")
    for _, row in ipairs(acc:gather_for_metrics(input_ids):totable()) do all[#all + 1] = row end
  end
  local rows = ds.tensors[1]:totable()
  check.truthy(mine < #rows, "each rank reads a share of the rows")
  check.equal(#all, #rows, "gathered, every row once")
  local function sorted(list)
    local keys = {}
    for i, row in ipairs(list) do keys[i] = table.concat(row, " ") end
    table.sort(keys)
    return table.concat(keys, "|")
  end
  check.equal(sorted(all), sorted(rows), "the data set's rows")
end
os.remove(path)
check.done("test_tokenizers_2ranks")
