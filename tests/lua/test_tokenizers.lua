-- accel.tokenizers without the oracle: the committed fixtures
-- (tests/tokenizers/make_fixtures.py) give the ids Hugging Face tokenizers
-- and sentencepiece gave; the special tokens and defaults come from the
-- folders' configs; batches pad left and right into int64 tensors the
-- models take as they are; save_pretrained reads back; TokenizedDataset
-- feeds a DataLoader; and bad input (text that is not UTF-8, unknown ids,
-- broken or unsupported files, bad options) is an error naming the file,
-- key, byte or id.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local core = require("accel.core")
local tokenizers = accel.tokenizers

local fixtures = arg[0]:match("(.*/)") .. "../tokenizers/fixtures"
local expected = core.json.read(fixtures .. "/expected.json")
local sentencepiece, why_not = core.tokenizers.sentencepiece_available()

local work = os.tmpname()
os.remove(work)
core.formats.make_empty_folder(work)

local function write(name, text)
  local path = work .. "/" .. name
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
  return path
end

-- The fixtures' ids, with and without special tokens, and their decoding.
local names = { "byte_level", "byte_fallback", "wordpiece" }
if sentencepiece then names[#names + 1] = "sentencepiece" else print("not checked: sentencepiece: " .. why_not) end
local tok = {}
for _, name in ipairs(names) do
  tok[name] = tokenizers.from_pretrained(fixtures .. "/" .. name)
  for i, case in ipairs(expected[name]) do
    check.near(tok[name]:encode(case.text), case.ids, 0, name .. " ids of text " .. i)
    check.near(tok[name]:encode(case.text, { add_special_tokens = false }), case.plain, 0, name .. " plain ids " .. i)
    check.equal(tok[name]:decode(case.ids), case.decoded, name .. " decoding of text " .. i)
  end
end

-- Special tokens and their ids, from the configs (and the model, for the tokenizer.model).
local bl, wp = tok.byte_level, tok.wordpiece
check.equal(bl.eos_token, "<|endoftext|>", "eos_token from tokenizer_config.json")
check.equal(bl.eos_token_id, 0, "its id is the file's, 0-based")
check.equal(bl.mask_token_id, bl:token_to_id("<mask>"), "mask_token_id")
check.equal(bl.pad_token_id, nil, "no pad token named")
check.equal(wp.cls_token_id, 2, "[CLS]")
check.equal(wp.pad_token_id, 0, "[PAD]")
check.equal(bl.vocab_size, 500, "vocab_size: the model's vocabulary")
check.equal(bl:get_vocab_size(), 502, "with the added tokens")
check.equal(bl:get_vocab_size({ with_added_tokens = false }), 500, "without")
check.equal(bl.model_max_length, 64, "model_max_length")
check.equal(tok.byte_fallback.padding_side, "left", "padding_side from the config")
if sentencepiece then
  local sp = tok.sentencepiece
  check.equal(sp.bos_token, "<s>", "the model's own BOS piece")
  check.equal(sp.bos_token_id, 1, "its id")
  check.equal(sp:encode("a")[1], 1, "BOS first, as add_bos_token says")
end
check.equal(table.concat(bl:tokenize("Hello, World!")), "Hello,ĠWorld!", "tokenize gives the byte-level tokens")
check.near(bl:convert_tokens_to_ids(bl:tokenize("Hello, World!")), expected.byte_level[3].plain, 0,
           "convert_tokens_to_ids gives the ids back")

-- Batches: int64 tensors, padded on either side, truncated, pairs.
local b = wp({ "hello world", "the" }, { padding = true })
check.equal(b.input_ids.dtype, "int64", "input_ids are int64")
check.equal(b.attention_mask.dtype, "int64", "attention_mask is int64")
check.equal(table.concat(b.input_ids:size(), "x"), "2x4", "padded to the longest")
check.near(b.input_ids[2], { 2, wp:token_to_id("the"), 3, 0 }, 0, "right padding with [PAD] = 0")
check.near(b.attention_mask, { { 1, 1, 1, 1 }, { 1, 1, 1, 0 } }, 0, "the mask is 0 on padding")
check.truthy(b.token_type_ids ~= nil, "a BertTokenizer returns token_type_ids")
b = wp({ "hello world", "the" }, { padding = true, padding_side = "left" })
check.near(b.input_ids[2], { 0, 2, wp:token_to_id("the"), 3 }, 0, "left padding")
check.near(b.attention_mask[2], { 0, 1, 1, 1 }, 0, "left padding's mask")
b = wp("the", { text_pair = "hello world" })
check.near(b.token_type_ids[1], { 0, 0, 0, 1, 1, 1 }, 0, "a pair's second text is segment 1")
b = wp({ "hello world hello world", "the" }, { padding = "max_length", max_length = 5, truncation = true })
check.equal(table.concat(b.input_ids:size(), "x"), "2x5", "padding to max_length, truncated to it")
check.equal(b.input_ids[1][5]:item(), 3, "truncation keeps room for [SEP]")
check.equal(#wp:encode("hello world hello world", { max_length = 4 }), 4, "max_length alone truncates")
check.equal(#wp:encode("hello world hello world", { max_length = 4, truncation = false }), 6, "unless asked not to")
check.equal(wp("a b c", { padding = true, pad_to_multiple_of = 8 }).input_ids:size(2), 8, "pad_to_multiple_of")
check.truthy(bl("x").token_type_ids == nil, "GPT-2-like tokenizers return no token_type_ids")
check.raises(function() bl({ "a", "a b c" }, { padding = true }) end, "padding without a pad token",
             "needs a pad token", "tok.pad_token_id")
check.raises(function() bl({ "a", "a b c" }) end, "different lengths without padding", "pass padding = true")
bl.pad_token_id = bl.eos_token_id
check.near(bl({ "a", "a a" }, { padding = true }).input_ids[1][2], bl.eos_token_id, 0, "the pad id the recipe set")
check.raises(function() wp({ "a" }, { padding = "middle" }) end, "bad padding", "padding must be")
check.raises(function() wp({ "a" }, { padding_side = "up" }) end, "bad side", 'padding_side must be "left" or "right"')
check.raises(function() wp({ "a" }, { colour = 1 }) end, "unknown option", "unknown option 'colour'")
check.raises(function() wp({}) end, "no texts", "non-empty list of strings")
check.raises(function() wp({ "a", 2 }) end, "a number among the texts", "texts[2] is a number")
check.raises(function() bl("x", { truncation = true, max_length = 0 }) end, "max_length 0",
             "max_length must be a positive integer")

-- Decoding: lists and tensors, special tokens skipped, a batch.
local ids = wp:encode("Hello, world!")
check.equal(wp:decode(ids), "[CLS] hello, world! [SEP]", "decode keeps special tokens")
check.equal(wp:decode(ids, { skip_special_tokens = true }), "hello, world!", "or skips them")
check.equal(wp:decode(accel.LongTensor(ids)), "[CLS] hello, world! [SEP]", "a 1-D int64 tensor")
local texts = wp:batch_decode(wp({ "hello", "the world" }, { padding = true }).input_ids, { skip_special_tokens = true })
check.equal(table.concat(texts, "|"), "hello|the world", "batch_decode of a padded batch")
check.equal(bl:decode(bl:encode("a ,b")), "a ,b", "no cleanup by default")
check.equal(bl:decode(bl:encode("a ,b"), { clean_up_tokenization_spaces = true }), "a,b", "transformers' cleanup")

-- Bad input: text that is not UTF-8, unknown ids, broken and unsupported files.
check.raises(function() bl:encode("ok\255") end, "invalid UTF-8", "not valid UTF-8", "byte 2", "\\xFF")
check.raises(function() bl({ "fine", "bad\192" }) end, "invalid UTF-8 in a batch", "text 2", "not valid UTF-8")
check.raises(function() bl:decode({ 0, 99999 }) end, "unknown id", "id 99999 is not in the vocabulary")
check.raises(function() bl:decode({ 1.5 }) end, "fractional id", "not an integer")
check.raises(function() bl:decode(accel.ones(2)) end, "float tensor", "integer")
check.raises(function() tokenizers.from_pretrained(work .. "/nothing") end, "missing folder",
             "has neither tokenizer.json nor tokenizer.model")
local broken = write("broken.json", '{"model": {"type": "BPE", "vocab": {"a": 0}, ')
check.raises(function() tokenizers.from_file(broken) end, "malformed JSON", broken, "is not valid JSON")
local unigram = write("unigram.json", '{"model": {"type": "Unigram", "vocab": [["a", 0.0]]}}')
check.raises(function() tokenizers.from_file(unigram) end, "unsupported model", unigram, "model.type is 'Unigram'")
local precompiled = write("precompiled.json", '{"normalizer": {"type": "Precompiled", "precompiled_charsmap": ""}, '
                          .. '"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}')
check.raises(function() tokenizers.from_file(precompiled) end, "unsupported normalizer", precompiled,
             "normalizer.type is 'Precompiled'")
local bad_merge = write("merge.json", '{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]}}')
check.raises(function() tokenizers.from_file(bad_merge) end, "merge making an unknown token", bad_merge,
             "model.merges[0] makes 'ab', which is not in the vocabulary")
local not_model = write("tokenizer.model", "this is not a protobuf")
if sentencepiece then
  check.raises(function() core.tokenizers.from_sentencepiece(not_model) end, "a broken tokenizer.model", not_model,
               "is not a SentencePiece model")
end

-- save_pretrained writes a folder from_pretrained (and Hugging Face) reads back.
for _, name in ipairs(names) do
  local files = tok[name]:save_pretrained(work .. "/saved_" .. name)
  check.equal(#files, 3, name .. ": the tokenizer file and two configs")
  local again = tokenizers.from_pretrained(work .. "/saved_" .. name)
  for i, case in ipairs(expected[name]) do
    check.near(again:encode(case.text), case.ids, 0, name .. " ids after save_pretrained, text " .. i)
  end
  check.equal(again.eos_token, tok[name].eos_token, name .. ": the same special tokens")
end

-- TokenizedDataset: padded rows with -100 labels on padding, or packed rows.
local jsonl = write("train.jsonl", '{"text": "hello world"}\n{"text": "the"}\n\n{"text": "hello the world, hello"}\n')
local ds = tokenizers.TokenizedDataset(jsonl, wp, { max_length = 6 })
check.equal(#ds.tensors[1]:totable(), 3, "one row a record")
local input_ids, attention_mask, labels = ds:get(2)
check.near(input_ids, { 2, wp:token_to_id("the"), 3, 0, 0, 0 }, 0, "padded to the longest row")
check.near(labels, { 2, wp:token_to_id("the"), 3, -100, -100, -100 }, 0, "labels are -100 on padding")
check.near(attention_mask, { 1, 1, 1, 0, 0, 0 }, 0, "the mask")
check.equal(ds:get(3)[6]:item(), 3, "a long record is cut to max_length, [SEP] kept")
local loader = accel.data.DataLoader(ds, { batch_size = 2 })
local rows = 0
for x, m, y in loader:iter() do
  check.equal(x.dtype, "int64", "batches of int64 ids")
  check.equal(table.concat(y:size(), "x"), table.concat(x:size(), "x"), "labels beside the ids")
  rows = rows + x:size(1)
end
check.equal(rows, 3, "the loader gives every row")
local text_file = write("train.txt", string.rep("hello world the end\n", 20))
-- Packed, wrapped (run_clm's): rows of exactly max_length, every token kept
-- but the rest; each record's positions from 0 (and again where a row cuts
-- it), the label -100 at each position 0.
local packed = tokenizers.TokenizedDataset(text_file, bl, { packing = true, packing_strategy = "wrapped",
                                                            max_length = 16 })
local x, m, y, pos = packed:get(1)
check.equal(x:size(1), 16, "packed rows are max_length long")
check.near(m, accel.ones(16), 0, "wrapped rows have no padding")
check.near(y:masked_select(pos:ne(0)), x:masked_select(pos:ne(0)), 0, "packed labels are the ids")
check.near(y:masked_select(pos:eq(0)), accel.full({ pos:eq(0):sum():item() }, -100), 0,
           "but -100 where a record starts: no token learns another record's start")
check.truthy(#x:totable() > 0 and packed.length >= 5, "the records fill several rows")
local eos = 0
for _, v in ipairs(packed.tensors[1]:view(-1):totable()) do
  if v == bl.eos_token_id then eos = eos + 1 end
end
check.truthy(eos >= 5, "records are joined with EOS")
local record = bl:encode("hello world the end")
record[#record + 1] = bl.eos_token_id
local expected_positions = {}
for j = 1, 16 do expected_positions[j] = (j - 1) % #record end
check.near(pos, expected_positions, 0, "positions restart at each record")
-- Best-fit decreasing (the default, TRL's): records whole, rows padded with
-- one-token documents the mask hides.
local bfd = tokenizers.TokenizedDataset(text_file, bl, { packing = true, max_length = 16 })
local bx, bm, by, bpos = bfd:get(1)
local per_row = math.floor(16 / #record)
check.equal(bfd.length, math.ceil(20 / per_row), "bfd rows hold whole records")
check.near(bx:narrow(1, 1, #record), record, 0, "a record whole at the row's start")
check.near(bm, accel.cat({ accel.ones(per_row * #record), accel.zeros(16 - per_row * #record) }), 0,
           "the padding masked")
check.near(bpos:narrow(1, #record + 1, #record), accel.arange(0, #record), 0, "the second record's positions from 0")
check.near(by:masked_select(bm:eq(0)), accel.full({ 16 - per_row * #record }, -100), 0, "padding labels -100")
-- Prompt-completion records (TRL's form): labels -100 on the prompt's
-- tokens, EOS after the completion; padded and packed.
local sft = tokenizers.from_pretrained(fixtures .. "/byte_level")
sft.pad_token_id = sft.eos_token_id
local pairs_file = write("sft.jsonl", '{"prompt": "hello", "completion": " world"}\n'
                                      .. '{"prompt": "the end", "completion": " hello the world"}\n')
local sft_ds = tokenizers.TokenizedDataset(pairs_file, sft, { completion_key = "completion", max_length = 32 })
for i, case in ipairs({ { "hello", " world" }, { "the end", " hello the world" } }) do
  local prompt = sft:encode(case[1])
  local full = sft:encode(case[1] .. case[2])
  full[#full + 1] = sft.eos_token_id
  local ids, mask, y = sft_ds:get(i)
  local n = mask:sum():item()
  check.equal(n, #full, "record " .. i .. ": prompt .. completion and EOS")
  check.near(ids:narrow(1, 1, n), full, 0, "record " .. i .. ": the ids of prompt .. completion, then EOS")
  local expected_labels = {}
  for j, id in ipairs(full) do expected_labels[j] = j <= #prompt and -100 or id end
  check.near(y:narrow(1, 1, n), expected_labels, 0, "record " .. i .. ": labels -100 on the prompt's tokens")
end
check.near(sft_ds:get(1):narrow(1, #sft:encode("hello world") + 2, 1), { sft.pad_token_id }, 0, "the short row padded")
check.equal(sft_ds:get(1)[-1]:item(), sft.pad_token_id, "on the tokenizer's padding side")
local all_labels = tokenizers.TokenizedDataset(pairs_file, sft, { completion_key = "completion",
                                                                  completion_only_loss = false })
local ids1, mask1, y1 = all_labels:get(1)
check.near(y1:masked_select(mask1:eq(1)), ids1:masked_select(mask1:eq(1)), 0,
           "completion_only_loss = false: labels are the ids")
local sft_packed = tokenizers.TokenizedDataset(write("sft_many.jsonl", string.rep(
  '{"prompt": "hello the", "completion": " end of the world"}\n', 12)), sft,
  { completion_key = "completion", packing = true, max_length = 16 })
local px, pm, py = sft_packed:get(1)
check.equal(px:size(1), 16, "packed prompt-completion rows are max_length long")
check.truthy(py:eq(-100):sum():item() > 0 and py:ne(-100):sum():item() > 0,
             "packed rows keep the prompts' -100 labels beside the completions'")
check.near(py:masked_select(py:ne(-100)), px:masked_select(py:ne(-100)), 0, "and the completions' labels are their ids")
check.raises(function() tokenizers.TokenizedDataset(pairs_file, sft, { completion_key = "answer" }) end,
             "a missing completion key", "line 1", '"answer"')
check.raises(function() tokenizers.TokenizedDataset(text_file, sft, { completion_key = "completion" }) end,
             "prompt-completion from a text file", "needs JSON Lines")
check.raises(function() tokenizers.TokenizedDataset(write("bad.jsonl", '{"text": 1}\n'), wp) end, "a number",
             "line 1", '"text" is not a string')
check.raises(function()
  tokenizers.TokenizedDataset(write("short.txt", "hi\n"), bl, { packing = true, packing_strategy = "wrapped" })
end, "too short to pack", "fewer than max_length")

-- The models take the ids and masks as they are: a batch padded on the
-- left, through a tiny Llama and its generate.
accel.set_seed(0)
local model = accel.models.from_config({ model_type = "llama", vocab_size = bl:get_vocab_size(), hidden_size = 16,
                                         intermediate_size = 32, num_hidden_layers = 1, num_attention_heads = 2,
                                         num_key_value_heads = 1 })
b = bl({ "hello world", "the" }, { padding = true, padding_side = "left" })
local out = model{ input_ids = b.input_ids, attention_mask = b.attention_mask, labels = b.input_ids,
                   skip_logits = false }
check.equal(out.logits:size(3), bl:get_vocab_size(), "logits over the tokenizer's ids")
local generated = model:generate(b.input_ids, { attention_mask = b.attention_mask, max_new_tokens = 2 })
check.equal(#bl:batch_decode(generated), 2, "generated ids decode")

os.execute("rm -rf '" .. work .. "'")
check.done("test_tokenizers")
