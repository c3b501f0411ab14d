-- A fine-tuning data file, tokenized into int64 rows a DataLoader batches:
--   local ds = accel.tokenizers.TokenizedDataset("train.jsonl", tok, {max_length = 512})
--   local loader = accel.data.DataLoader(ds, {batch_size = 8, shuffle = true})
--   for input_ids, attention_mask, labels, position_ids in loader:iter() do
--     local out = model{input_ids = input_ids, attention_mask = attention_mask, labels = labels,
--                       position_ids = position_ids}
-- Each sample is (input_ids, attention_mask, labels), each int64 [L], and
-- packed, position_ids as well:
--  - padded (the default): one example a row, cut to max_length
--    (truncation_mode) and padded to the longest row (padding_side from the
--    tokenizer); labels are -100 on padding, which the loss ignores;
--  - packing = true: several examples a row of max_length, each with its
--    positions from 0, so that the models keep attention within each
--    (training_rows.lua): packing_strategy "bfd" (the default, TRL's) keeps
--    examples whole, "wrapped" joins them all and cuts rows of exactly
--    max_length, as transformers' run_clm.
-- Records: format "text" (each non-empty line) or "jsonl" (the string
-- under text_key on each line); by default "jsonl" for .jsonl and .json
-- files. Plain text examples end with the tokenizer's EOS (appended unless
-- there). With completion_key, a JSON Lines record is a prompt and its
-- completion (prompt_key, default "prompt"), as TRL's prompt-completion
-- datasets: strings (ids of prompt .. completion .. EOS) or message lists
-- (the chat template applied, conversations.lua); with completion_only_loss
-- (the default, as TRL's) labels are -100 on the prompt. With messages_key,
-- a record is a conversation (a list of {role, content}) the chat template
-- renders; assistant_only_loss keeps the loss on the assistant's turns.
-- The rows are tensors, so the DataLoader shards and gathers them in C++ on
-- any number of ranks. Ids are the file's, 0-based.
local args = require("accel.util.args")
local core = require("accel.core")
local training_rows = require("accel.tokenizers.training_rows")
local conversations = require("accel.tokenizers.conversations")

local TokenizedDataset = {}
TokenizedDataset.__index = TokenizedDataset

local function with_eos(tok, ids)
  if tok.eos_token_id ~= nil and ids[#ids] ~= tok.eos_token_id then ids[#ids + 1] = tok.eos_token_id end
  return ids
end

-- Examples of plain text: labels the ids.
local function text_examples(tok, texts, o)
  local out = {}
  for i, text in ipairs(texts) do
    local ids = with_eos(tok, tok.handle:encode(text, { add_special_tokens = o.add_special_tokens }))
    local labels = {}
    for j, id in ipairs(ids) do labels[j] = id end
    out[i] = { ids = ids, labels = labels }
  end
  return out
end

-- Examples of prompt-completion strings: the ids of prompt .. completion
-- (EOS appended unless there), -100 on the prompt's tokens when
-- completion_only: as TRL, those the prompt alone shares with the start of
-- prompt .. completion (fewer when a token spans the boundary).
local function prompt_completion_examples(tok, prompts, completions, o)
  local out = {}
  for i = 1, #prompts do
    local prompt_ids = tok.handle:encode(prompts[i], { add_special_tokens = o.add_special_tokens })
    local ids = with_eos(tok, tok.handle:encode(prompts[i] .. completions[i], { add_special_tokens = o.add_special_tokens }))
    local labels = {}
    local shared = conversations.common_prefix_length(prompt_ids, ids)
    for j, id in ipairs(ids) do labels[j] = (o.completion_only_loss and j <= shared) and -100 or id end
    out[i] = { ids = ids, labels = labels }
  end
  return out
end

-- Examples of conversations (messages_key) or conversational
-- prompt-completion records; nil when the records are strings.
local function conversational_examples(tok, path, o)
  local entries = conversations.read(path, o.where)
  if #entries == 0 then return {} end
  local make
  if o.messages_key then
    make = conversations.messages_example
  elseif conversations.is_conversational(entries[1], o.prompt_key) then
    make = conversations.prompt_completion_example
  else
    return nil
  end
  if tok.chat_template == nil then
    args.error(string.format("%s: '%s' holds conversations, which need a tokenizer with a chat template "
                             .. "(chat_template.jinja, or chat_template in tokenizer_config.json; or set "
                             .. "tok.chat_template)", o.where, path))
  end
  local out = {}
  for _, entry in ipairs(entries) do out[#out + 1] = make(tok, entry, o) end
  return out
end

local function dataset(path, tensors, examples)
  return setmetatable({ path = path, tensors = tensors, length = tensors[1]:size(1), examples = examples },
                      TokenizedDataset)
end

-- Plain text records, one a row: cut by the tokenizer (its truncation_side,
-- the special tokens kept) and padded; labels the ids but on padding.
local function padded_texts(tok, texts, o)
  local input_ids, attention_mask = tok.handle:encode_batch(texts, nil, {
    add_special_tokens = o.add_special_tokens, max_length = o.max_length, truncation_side = tok.truncation_side,
    padding = true, padding_side = tok.padding_side, pad_id = tok.pad_token_id,
  })
  return dataset(o.path, { input_ids, attention_mask, input_ids:masked_fill(attention_mask:eq(0), -100) }, #texts)
end

local function one_of(where, name, value, allowed)
  for _, a in ipairs(allowed) do if value == a then return end end
  args.error(string.format("%s: %s must be \"%s\", got \"%s\"", where, name, table.concat(allowed, "\", \""), value))
end

local function new(_, path, tok, options)
  local where = "accel.tokenizers.TokenizedDataset"
  if type(path) ~= "string" then args.error(where .. ": expected a file path, got a " .. type(path)) end
  if type(tok) ~= "table" or type(tok.handle) ~= "userdata" then
    args.error(where .. ": expected a tokenizer (accel.tokenizers.from_pretrained) as argument 2")
  end
  local o = args.options(where, options, {
    format = path:match("%.jsonl?$") and "jsonl" or "text", text_key = "text", max_length = 512,
    packing = false, packing_strategy = "bfd", add_special_tokens = true, prompt_key = "prompt",
    completion_key = false, completion_only_loss = true, messages_key = false, assistant_only_loss = false,
    truncation_mode = "keep_start",
  }, { format = "string", text_key = "string", max_length = "number", packing = "boolean",
       packing_strategy = "string", add_special_tokens = "boolean", prompt_key = "string", completion_key = "string",
       completion_only_loss = "boolean", messages_key = "string", assistant_only_loss = "boolean",
       truncation_mode = "string" })
  o.where, o.path = where, path
  o.max_length = args.positive_integer(where, "max_length", o.max_length)
  one_of(where, "packing_strategy", o.packing_strategy, { "bfd", "wrapped" })
  one_of(where, "truncation_mode", o.truncation_mode, { "keep_start", "keep_end", "whole_turns" })
  if (o.completion_key or o.messages_key) and o.format ~= "jsonl" then
    args.error(string.format("%s: %s needs JSON Lines records (format \"jsonl\"), and '%s' is read as "
                             .. "format \"%s\"", where, o.completion_key and "completion_key" or "messages_key",
                             path, o.format))
  end
  if o.completion_key and o.messages_key then
    args.error(where .. ": give messages_key (conversations) or completion_key (prompt-completion records), not both")
  end
  if o.truncation_mode == "whole_turns" and not o.messages_key then
    args.error(where .. ": truncation_mode \"whole_turns\" cuts conversations (messages_key) between messages")
  end
  if not o.packing and tok.pad_token_id == nil then
    args.error(where .. ": padded rows need a pad token, and the tokenizer has none: set tok.pad_token_id (for "
               .. "example to tok.eos_token_id) or pass packing = true")
  end
  local examples = (o.messages_key or o.completion_key) and conversational_examples(tok, path, o)
  if o.assistant_only_loss and not examples then
    args.error(where .. ": assistant_only_loss needs conversational records (messages_key, or prompt and "
               .. "completion message lists)")
  end
  if not examples then
    local texts = core.tokenizers.read_records(path, o.format, o.completion_key and o.prompt_key or o.text_key)
    if #texts == 0 then args.error(string.format("%s: '%s' has no records", where, path)) end
    if not o.completion_key and not o.packing then return padded_texts(tok, texts, o) end
    if o.completion_key then
      examples = prompt_completion_examples(tok, texts, core.tokenizers.read_records(path, "jsonl", o.completion_key), o)
    else
      examples = text_examples(tok, texts, o)
    end
  end
  if #examples == 0 then args.error(string.format("%s: '%s' has no records", where, path)) end

  -- Cut (unless wrapped packing cuts them); padded, those left with no
  -- label are dropped (they teach nothing), as TRL drops them (packed, TRL
  -- keeps them, and so does accel: the rows stay TRL's).
  local kept = {}
  for _, e in ipairs(examples) do
    if not (o.packing and o.packing_strategy == "wrapped") then
      e = training_rows.truncate(e, o.max_length, o.truncation_mode)
    end
    local learnt = false
    for _, l in ipairs(e.labels) do if l ~= -100 then learnt = true break end end
    if learnt or o.packing then kept[#kept + 1] = e end
  end
  if #kept == 0 then
    args.error(string.format("%s: '%s': no record has a token to learn within max_length = %d", where, path,
                             o.max_length))
  end
  local tensors
  if o.packing then
    tensors = { training_rows.pack(kept, o.max_length, o.packing_strategy, tok.pad_token_id or tok.eos_token_id or 0) }
    if #tensors == 0 then
      args.error(string.format("%s: '%s' has fewer than max_length = %d tokens, not one packed row", where, path,
                               o.max_length))
    end
  else
    tensors = { training_rows.pad(kept, o.max_length, tok.pad_token_id, tok.padding_side) }
  end
  return dataset(path, tensors, #kept)
end

function TokenizedDataset:__len()
  return self.length
end

function TokenizedDataset:get(i)
  local t = self.tensors
  if t[4] then return t[1][i], t[2][i], t[3][i], t[4][i] end
  return t[1][i], t[2][i], t[3][i]
end

return setmetatable(TokenizedDataset, { __call = new })
