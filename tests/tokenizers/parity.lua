-- accel.tokenizers against Hugging Face tokenizers and sentencepiece
-- (make_tokenizers.py wrote the tokenizers and what they give):
--   accel-run parity.lua -- OUT CORPUS.json SAVED
-- For every tokenizer in OUT/cases.txt and every corpus text: the ids with
-- and without special tokens, the decoded text with and without them; the
-- batches (left and right padding, truncation, pairs); the digests of the
-- code point sweep's ids and decoded text. Each tokenizer is also saved
-- with save_pretrained into SAVED/<name> and read back, giving the same ids.
-- Prints a line per tokenizer and the first differences; fails on any.
local core = require("accel.core")
local dir, corpus_path, saved = arg[1], arg[2], arg[3]
assert(dir and corpus_path and saved, "usage: accel-run parity.lua -- OUT CORPUS.json SAVED")

local corpus = core.json.read(corpus_path).texts
local sweep = core.json.read(dir .. "/sweep.json").texts
local expected = core.json.read(dir .. "/expected.json")

local failures = 0
local shown = {}

-- A text as a message shows it: escapes for controls, at most 60 bytes.
local function show(text)
  local s = text:sub(1, 60):gsub("[%z\1-\31\127]", function(c) return string.format("\\x%02x", c:byte()) end)
  return "'" .. s .. "'" .. (#text > 60 and "..." or "")
end

local function differ(name, what, detail)
  failures = failures + 1
  shown[name] = (shown[name] or 0) + 1
  if shown[name] <= 6 then print(string.format("  DIFFERS %s %s: %s", name, what, detail)) end
end

local function same_list(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do
    if a[i] ~= b[i] then return false end
  end
  return true
end

local function ids_text(ids)
  local parts = {}
  for i = 1, math.min(#ids, 24) do parts[i] = tostring(ids[i]) end
  return "{" .. table.concat(parts, " ") .. (#ids > 24 and " ..." or "") .. "}"
end

-- FNV-1a over ids (4 little-endian bytes each) or over a string's bytes, as
-- make_tokenizers.py computes it. 0x01000193 = 2^24 + 0x193 keeps each
-- product exact in a double.
local function fnv_step(h, byte)
  h = bit.bxor(h, byte)
  return bit.tobit(bit.lshift(h, 24) + bit.band(h, 0xFFFFFFFF) % 4294967296 * 0x193)
end

local function digest_ids(ids)
  local h = bit.tobit(0x811C9DC5)
  for i = 1, #ids do
    local v = ids[i]
    for k = 0, 3 do h = fnv_step(h, bit.band(bit.rshift(v, 8 * k), 0xFF)) end
  end
  return h
end

local function digest_text(text)
  local h = bit.tobit(0x811C9DC5)
  for i = 1, #text do h = fnv_step(h, text:byte(i)) end
  return h
end

-- The first code point of a UTF-8 string (the sweep line's first is its 2nd character).
local function utf8_first(text)
  local b1, b2, b3, b4 = text:byte(2, 5)
  if b1 < 0x80 then return b1 end
  if b1 < 0xE0 then return (b1 - 0xC0) * 64 + (b2 - 0x80) end
  if b1 < 0xF0 then return ((b1 - 0xE0) * 64 + (b2 - 0x80)) * 64 + (b3 - 0x80) end
  return (((b1 - 0xF0) * 64 + (b2 - 0x80)) * 64 + (b3 - 0x80)) * 64 + (b4 - 0x80)
end

local function check_tokenizer(name)
  local e = expected[name]
  local tok = accel.tokenizers.from_pretrained(dir .. "/" .. name)
  tok.pad_token_id = e.pad_id
  local start = accel.time()
  for i, text in ipairs(corpus) do
    local ids = tok:encode(text)
    if not same_list(ids, e.ids[i]) then
      differ(name, "ids of text " .. i .. " " .. show(text), ids_text(ids) .. " vs " .. ids_text(e.ids[i]))
    end
    local plain = tok:encode(text, { add_special_tokens = false })
    if not same_list(plain, e.plain[i]) then
      differ(name, "ids without special tokens of text " .. i .. " " .. show(text),
             ids_text(plain) .. " vs " .. ids_text(e.plain[i]))
    end
    local decoded = tok:decode(e.ids[i])
    if decoded ~= e.decoded[i] then
      differ(name, "decoding of text " .. i, show(decoded) .. " vs " .. show(e.decoded[i]))
    end
    local skipped = tok:decode(e.ids[i], { skip_special_tokens = true })
    if skipped ~= e.decoded_skip[i] then
      differ(name, "decoding (skip_special_tokens) of text " .. i, show(skipped) .. " vs " .. show(e.decoded_skip[i]))
    end
  end
  local corpus_seconds = accel.time() - start
  for k, b in ipairs(e.batches) do
    local options = {}
    for key, v in pairs(b.options) do options[key] = v end
    options.return_token_type_ids = true
    if b.pairs ~= core.json.null then options.text_pair = b.pairs end
    local out = tok(b.texts, options)
    for _, field in ipairs({ "input_ids", "attention_mask", "token_type_ids" }) do
      local got, want = out[field]:totable(), b[field]
      local equal = #got == #want
      for r = 1, #want do equal = equal and same_list(got[r], want[r]) end
      if not equal then
        differ(name, string.format("batch %d (%s) %s", k, core.json.encode(b.options):gsub("%s+", " "), field),
               "row 1 " .. ids_text(got[1] or {}) .. " vs " .. ids_text(want[1]))
      end
    end
  end
  for i, text in ipairs(sweep) do
    local ids = tok:encode(text)
    if bit.tobit(digest_ids(ids)) ~= bit.tobit(e.sweep_ids[i]) then
      differ(name, "ids of sweep line " .. i, "from U+" .. string.format("%04X", utf8_first(text)))
    end
    if bit.tobit(digest_text(tok:decode(ids))) ~= bit.tobit(e.sweep_text[i]) then
      differ(name, "decoding of sweep line " .. i, "")
    end
  end
  -- save_pretrained, read back.
  local folder = saved .. "/" .. name
  tok:save_pretrained(folder)
  local again = accel.tokenizers.from_pretrained(folder)
  for i = 1, #corpus, 7 do
    if not same_list(again:encode(corpus[i]), e.ids[i]) then differ(name, "ids after save_pretrained, text " .. i, "") end
  end
  print(string.format("%s: %d texts, %d batches, %d sweep lines (%.2f s for the texts)%s", name, #corpus,
                      #e.batches, #sweep, corpus_seconds, shown[name] and (": " .. shown[name] .. " differ") or
                      ": all equal"))
end

-- A sanitizer build has no SentencePiece (docs/api/tokenizers.md): that
-- case is named as not checked. SAVED/cases.txt lists the cases checked,
-- for check_saved.py.
local sentencepiece, why_not = accel.tokenizers.sentencepiece_available()
local checked = {}
for name in io.lines(dir .. "/cases.txt") do
  if name == "sentencepiece" and not sentencepiece then
    print("not checked: sentencepiece (" .. why_not .. ")")
  elseif name ~= "" then
    check_tokenizer(name)
    checked[#checked + 1] = name
  end
end
local list = assert(io.open(saved .. "/cases.txt", "w"))
list:write(table.concat(checked, "\n"), "\n")
list:close()
if failures > 0 then error(string.format("%d differences from Hugging Face tokenizers", failures), 0) end
print("every tokenizer gives the reference's ids and text")
