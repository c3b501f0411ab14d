-- A fine-tuning data file, tokenized into int64 rows a DataLoader batches:
--   local ds = accel.tokenizers.TokenizedDataset("train.jsonl", tok, {max_length = 512})
--   local loader = accel.data.DataLoader(ds, {batch_size = 8, shuffle = true})
--   for input_ids, attention_mask, labels in loader:iter() do
--     local out = model{input_ids = input_ids, attention_mask = attention_mask, labels = labels}
-- Each sample is (input_ids, attention_mask, labels), each int64 [L]:
--  - padded (the default): one record a row, cut to max_length and padded
--    to the longest row (padding_side from the tokenizer); labels are the
--    ids with -100 on padding, which the loss ignores;
--  - packing = true: every record's ids one after another, each followed
--    by the tokenizer's EOS (unless it already ends with it), cut into rows
--    of exactly max_length (the rest dropped, as transformers' run_clm
--    does); the mask is all ones and labels equal the ids.
-- Records: format "text" (each non-empty line) or "jsonl" (the string
-- under text_key on each line); by default "jsonl" for .jsonl and .json
-- files. With completion_key, a JSON Lines record is a prompt and its
-- completion (prompt_key, default "prompt"), as TRL's prompt-completion
-- datasets: the ids are those of prompt .. completion followed by EOS, and
-- with completion_only_loss (the default, as TRL's) labels are -100 on the
-- prompt's tokens (as many as the prompt alone gives), so only the
-- completion is learnt. The rows are tensors, so the DataLoader shards and
-- gathers them in C++ on any number of ranks. Ids are the file's, 0-based.
local args = require("accel.util.args")
local core = require("accel.core")

local TokenizedDataset = {}
TokenizedDataset.__index = TokenizedDataset

-- Rows of prompt-completion records as Lua lists: ids (prompt ..
-- completion, EOS appended unless there) and labels (-100 on the prompt's
-- tokens when completion_only).
local function prompt_completion_rows(tok, prompts, completions, o)
  local ids, labels = {}, {}
  for i = 1, #prompts do
    local prompt_ids = tok.handle:encode(prompts[i], { add_special_tokens = o.add_special_tokens })
    local row = tok.handle:encode(prompts[i] .. completions[i], { add_special_tokens = o.add_special_tokens })
    if tok.eos_token_id ~= nil and row[#row] ~= tok.eos_token_id then row[#row + 1] = tok.eos_token_id end
    local label = {}
    for j, id in ipairs(row) do
      label[j] = (o.completion_only_loss and j <= #prompt_ids) and -100 or id
    end
    ids[i], labels[i] = row, label
  end
  return ids, labels
end

-- Lists of rows cut to max_length and padded to the longest (pad id,
-- label -100, mask 0 on `side`), as int64 tensors [rows, length].
local function pad_rows(ids, labels, max_length, pad_id, side)
  local width = 0
  for _, row in ipairs(ids) do width = math.max(width, math.min(#row, max_length)) end
  local out_ids, out_mask, out_labels = {}, {}, {}
  for i, row in ipairs(ids) do
    local n = math.min(#row, max_length)
    local r_ids, r_mask, r_labels = {}, {}, {}
    local offset = side == "left" and width - n or 0
    for j = 1, width do
      local k = j - offset
      local inside = k >= 1 and k <= n
      r_ids[j], r_mask[j], r_labels[j] = inside and row[k] or pad_id, inside and 1 or 0, inside and labels[i][k] or -100
    end
    out_ids[i], out_mask[i], out_labels[i] = r_ids, r_mask, r_labels
  end
  return core.tensor(out_ids, { dtype = "int64" }), core.tensor(out_mask, { dtype = "int64" }),
         core.tensor(out_labels, { dtype = "int64" })
end

-- The rows one after another, cut into blocks of max_length (the rest
-- dropped): ids and labels [blocks, max_length].
local function pack_rows(ids, labels, max_length)
  local flat_ids, flat_labels = {}, {}
  for i, row in ipairs(ids) do
    for j, id in ipairs(row) do
      flat_ids[#flat_ids + 1], flat_labels[#flat_labels + 1] = id, labels[i][j]
    end
  end
  local blocks = math.floor(#flat_ids / max_length)
  local n = blocks * max_length
  for k = #flat_ids, n + 1, -1 do flat_ids[k], flat_labels[k] = nil, nil end
  if blocks == 0 then return nil end
  return core.tensor(flat_ids, { dtype = "int64" }):view(blocks, max_length),
         core.tensor(flat_labels, { dtype = "int64" }):view(blocks, max_length)
end

local function new(_, path, tok, options)
  local where = "accel.tokenizers.TokenizedDataset"
  if type(path) ~= "string" then args.error(where .. ": expected a file path, got a " .. type(path)) end
  if type(tok) ~= "table" or type(tok.handle) ~= "userdata" then
    args.error(where .. ": expected a tokenizer (accel.tokenizers.from_pretrained) as argument 2")
  end
  local o = args.options(where, options, {
    format = path:match("%.jsonl?$") and "jsonl" or "text", text_key = "text", max_length = 512,
    packing = false, add_special_tokens = true, prompt_key = "prompt", completion_key = false,
    completion_only_loss = true,
  }, { format = "string", text_key = "string", max_length = "number", packing = "boolean",
       add_special_tokens = "boolean", prompt_key = "string", completion_key = "string",
       completion_only_loss = "boolean" })
  local max_length = args.positive_integer(where, "max_length", o.max_length)
  if o.completion_key and o.format ~= "jsonl" then
    args.error(string.format("%s: completion_key needs JSON Lines records (format \"jsonl\"), and '%s' is read as "
                             .. "format \"%s\"", where, path, o.format))
  end
  local texts = core.tokenizers.read_records(path, o.format, o.completion_key and o.prompt_key or o.text_key)
  if #texts == 0 then args.error(string.format("%s: '%s' has no records", where, path)) end
  local input_ids, attention_mask, labels
  if o.completion_key then
    if not o.packing and tok.pad_token_id == nil then
      args.error(where .. ": padded rows need a pad token, and the tokenizer has none: set tok.pad_token_id (for "
                 .. "example to tok.eos_token_id) or pass packing = true")
    end
    local completions = core.tokenizers.read_records(path, "jsonl", o.completion_key)
    local ids, row_labels = prompt_completion_rows(tok, texts, completions, o)
    if o.packing then
      input_ids, labels = pack_rows(ids, row_labels, max_length)
      if not input_ids then
        args.error(string.format("%s: '%s' has fewer than max_length = %d tokens, not one packed row", where, path,
                                 max_length))
      end
      attention_mask = core.ones_like(input_ids)
    else
      input_ids, attention_mask, labels = pad_rows(ids, row_labels, max_length, tok.pad_token_id, tok.padding_side)
    end
  elseif o.packing then
    input_ids = tok.handle:pack(texts, max_length, tok.eos_token_id, o.add_special_tokens)
    if input_ids:size(1) == 0 then
      args.error(string.format("%s: '%s' has fewer than max_length = %d tokens, not one packed row", where, path,
                               max_length))
    end
    attention_mask = core.ones_like(input_ids)
    labels = input_ids:clone()
  else
    if tok.pad_token_id == nil then
      args.error(where .. ": padded rows need a pad token, and the tokenizer has none: set tok.pad_token_id (for "
                 .. "example to tok.eos_token_id) or pass packing = true")
    end
    input_ids, attention_mask = tok.handle:encode_batch(texts, nil, {
      add_special_tokens = o.add_special_tokens, max_length = max_length, truncation_side = tok.truncation_side,
      padding = true, padding_side = tok.padding_side, pad_id = tok.pad_token_id,
    })
    labels = input_ids:masked_fill(attention_mask:eq(0), -100)
  end
  return setmetatable({
    path = path,
    tensors = { input_ids, attention_mask, labels },
    length = input_ids:size(1),
  }, TokenizedDataset)
end

function TokenizedDataset:__len()
  return self.length
end

function TokenizedDataset:get(i)
  local t = self.tensors
  return t[1][i], t[2][i], t[3][i]
end

return setmetatable(TokenizedDataset, { __call = new })
