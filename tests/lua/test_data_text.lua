-- TextDataset: windows of a file's tokens at char (UTF-8) and byte level,
-- the vocabulary's ids and round trip, stride, a shared vocabulary, and
-- errors that name the file, line and column.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local data = accel.data

local function write(text)
  local path = os.tmpname() .. ".txt"
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
  return path
end

-- Characters sorted by code point get ids 1..V.
local abc = write("abcabcab")
local ds = data.TextDataset(abc, { seq_len = 3 })
check.equal(ds.vocab.vocab_size, 3, "three characters")
check.equal(table.concat(ds.vocab.tokens, ""), "abc", "tokens by id")
check.equal(ds.vocab.level, "char", "char level by default")
check.near(ds.ids, { 1, 2, 3, 1, 2, 3, 1, 2 }, 0, "ids of the text")
-- 8 tokens, windows of 3 at stride 3: starts 1, 4 (a third would need token 10).
check.equal(data.DataLoader(ds, {}):num_batches(), 2, "two windows")
local x, y = ds:get(2)
check.near(x, { 1, 2, 3 }, 0, "input = tokens 4..6")
check.near(y, { 2, 3, 1 }, 0, "target = tokens 5..7")
check.equal(x.dtype, "int64", "ids are int64")

-- stride 1: every position; the loader stacks windows into [B, seq_len].
ds = data.TextDataset(abc, { seq_len = 3, stride = 1 })
local starts = {}
for xb, yb in data.DataLoader(ds, { batch_size = 4 }):iter() do
  check.equal(xb:size(2), 3, "batch of windows")
  check.near(yb:narrow(2, 1, 2), xb:narrow(2, 2, 2), 0, "targets are inputs shifted by one")
  for _, row in ipairs(xb:totable()) do starts[#starts + 1] = ds.vocab:decode(row) end
end
check.equal(table.concat(starts, " "), "abc bca cab abc bca", "all five windows, in order")

-- UTF-8 characters are one token each; encode and decode round-trip, with
-- a table or a tensor, and also called with a dot.
local utf8 = write("héllo wörld, 日本\n")
ds = data.TextDataset(utf8, { seq_len = 4 })
check.equal(ds.ids:numel(), 16, "16 characters, not bytes")
check.equal(ds.vocab:decode(ds.ids), "héllo wörld, 日本\n", "decode(encode(text)) == text")
local ids = ds.vocab:encode("日本 wörld")
check.equal(ids.dtype, "int64", "encode gives int64 ids")
check.equal(ds.vocab.decode(ids:totable()), "日本 wörld", "decode of a table, called with a dot")
check.equal(ds.vocab.decode(ds.vocab.encode("hé")), "hé", "encode called with a dot")
check.equal(ds.vocab.tokens[ds.vocab:encode("日"):item()], "日", "tokens[id] is the character")
check.raises(function() ds.vocab:encode("hlz") end, "unknown character",
             "text:1:3: character 'z' (U+007A) is not in the vocabulary (13 characters)")
check.raises(function() ds.vocab:decode({ 1, 14 }) end, "id out of range", "id 14 at position 2", "1..13")
check.raises(function() ds.vocab:decode(accel.ones(2)) end, "float ids", "integer ids")

-- Byte level: the 256 bytes, id = byte + 1; any text encodes.
ds = data.TextDataset(utf8, { seq_len = 4, level = "byte" })
check.equal(ds.vocab.vocab_size, 256, "all bytes")
check.equal(ds.ids:numel(), #"héllo wörld, 日本\n", "one id per byte")
check.near(ds.vocab:encode("A\0"), { 66, 1 }, 0, "id = byte + 1")
check.equal(ds.vocab:decode(ds.vocab:encode("\255x")), "\255x", "bytes round-trip")

-- A second file read with the first one's vocabulary shares its ids.
local lines = write("abc\nbca\n")
local train = data.TextDataset(lines, { seq_len = 2 })
local valid = data.TextDataset(write("cab"), { seq_len = 2, vocab = train.vocab })
check.equal(valid.vocab, train.vocab, "the vocabulary is shared")
check.near(valid.ids, { 4, 2, 3 }, 0, "ids under the shared vocabulary ('\\n' is id 1)")
local other = write("ab\ncd")
check.raises(function() data.TextDataset(other, { seq_len = 2, vocab = train.vocab }) end,
             "character outside a given vocabulary", other .. ":2:2: character 'd' (U+0064)")

-- Errors name the file and position, or the option.
local binary = write("ok\n\255")
check.raises(function() data.TextDataset(binary, { seq_len = 1 }) end, "invalid UTF-8",
             binary .. ":2:1: byte 0xFF is not valid UTF-8", 'level = "byte"')
check.equal(data.TextDataset(binary, { seq_len = 1, level = "byte" }).ids:numel(), 4, "binary at byte level")
check.raises(function() data.TextDataset(abc, { seq_len = 8 }) end, "too short", "8 tokens", "at least 9")
check.raises(function() data.TextDataset(abc, { seq_len = 0 }) end, "seq_len", "seq_len must be a positive integer")
check.raises(function() data.TextDataset(abc, { level = "word" }) end, "level", '"char" or "byte"', '"word"')
check.raises(function() data.TextDataset(abc, { seqlen = 4 }) end, "unknown option", "seqlen")
check.raises(function() data.TextDataset(abc, { seq_len = 2, level = "byte", vocab = train.vocab }) end,
             "level and vocab disagree", "char level")

-- Workers read windows exactly as the Lua thread does.
ds = data.TextDataset(utf8, { seq_len = 3, stride = 2 })
local function epoch(options)
  local out = {}
  for xb, yb in data.DataLoader(ds, options):iter() do out[#out + 1] = { xb:totable(), yb:totable() } end
  return out
end
local serial = epoch({ batch_size = 2, shuffle = true, seed = 1 })
local threaded = epoch({ batch_size = 2, shuffle = true, seed = 1, num_workers = 2 })
check.equal(#threaded, #serial, "same number of batches")
for i = 1, #serial do check.near(threaded[i], serial[i], 0, "window batch " .. i) end

for _, path in ipairs({ abc, utf8, lines, other, binary }) do os.remove(path) end
check.done("test_data_text")
