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
-- files. The rows are tensors, so the DataLoader shards and gathers them
-- in C++ on any number of ranks. Ids are the file's, 0-based.
local args = require("accel.args")
local core = require("accel.core")

local TokenizedDataset = {}
TokenizedDataset.__index = TokenizedDataset

local function new(_, path, tok, options)
  local where = "accel.tokenizers.TokenizedDataset"
  if type(path) ~= "string" then args.error(where .. ": expected a file path, got a " .. type(path)) end
  if type(tok) ~= "table" or type(tok.handle) ~= "userdata" then
    args.error(where .. ": expected a tokenizer (accel.tokenizers.from_pretrained) as argument 2")
  end
  local o = args.options(where, options, {
    format = path:match("%.jsonl?$") and "jsonl" or "text", text_key = "text", max_length = 512,
    packing = false, add_special_tokens = true,
  }, { format = "string", text_key = "string", max_length = "number", packing = "boolean",
       add_special_tokens = "boolean" })
  local max_length = args.positive_integer(where, "max_length", o.max_length)
  local texts = core.tokenizers.read_records(path, o.format, o.text_key)
  if #texts == 0 then args.error(string.format("%s: '%s' has no records", where, path)) end
  local input_ids, attention_mask, labels
  if o.packing then
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
