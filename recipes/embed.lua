-- Sentence embeddings from a BERT checkpoint folder (sentence-transformers'
-- all-MiniLM-L6-v2, say), as sentence-transformers computes them: the mean
-- of last_hidden_state over the real tokens, L2-normalized. Prints each
-- sentence's nearest other sentence by cosine similarity, and the whole
-- similarity table for a few sentences.
--   accel-run recipes/embed.lua -- MODEL_DIR IDS_FILE [SENTENCES_TXT]
-- accel has no tokenizer yet, so the token ids come ready-made in IDS_FILE:
-- either JSON, {"input_ids": [[101, 7592, 1010, 2088, 999, 102], ...]}, the
-- lists of ids the model's tokenizer gives ([CLS] ... [SEP]), or a
-- safetensors file with input_ids and attention_mask (right-padded), as
-- tests/models/make_minilm_reference.py writes minilm_reference.safetensors.
-- SENTENCES_TXT (one sentence a line, that script's minilm_sentences.txt)
-- labels the output; without it sentences are numbered.
local usage = "usage: accel-run recipes/embed.lua -- MODEL_DIR IDS_FILE [SENTENCES_TXT]"
local model_dir, ids_file, sentences_file = assert(arg[1], usage), assert(arg[2], usage), arg[3]
local F = accel.nn.functional
local core = require("accel.core")

-- input_ids and attention_mask, right-padded with the model's pad id.
local function read_ids(path, pad)
  if path:match("%.safetensors$") then
    local t = core.checkpoint.read_safetensors(path)
    return assert(t.input_ids, path .. " has no input_ids"), assert(t.attention_mask, path .. " has no attention_mask")
  end
  local lists = assert(core.json.read(path).input_ids, path .. " has no input_ids")
  local longest = 0
  for _, ids in ipairs(lists) do longest = math.max(longest, #ids) end
  local ids, mask = {}, {}
  for i, list in ipairs(lists) do
    ids[i], mask[i] = {}, {}
    for j = 1, longest do
      ids[i][j], mask[i][j] = list[j] or pad, list[j] and 1 or 0
    end
  end
  return accel.LongTensor(ids), accel.LongTensor(mask)
end

local labels = {}
if sentences_file then
  for line in io.lines(sentences_file) do labels[#labels + 1] = line end
end
local function label(i)
  local text = labels[i] or ("sentence " .. i)
  return #text > 60 and (text:sub(1, 57) .. "...") or text
end

local device = accel.cuda.is_available() and "cuda:0" or "cpu"
local model = accel.models.from_pretrained(model_dir):to(device)
local ids, mask = read_ids(ids_file, model.config.pad_token_id or 0)
ids, mask = ids:to(device), mask:to(device)
local embeddings = accel.no_grad(function()
  local hidden = model{ input_ids = ids, attention_mask = mask }.last_hidden_state
  return F.normalize(accel.models.mean_pooling(hidden, mask), { dim = -1 })
end)
-- Unit vectors: their dot products are the cosine similarities.
local similarity = embeddings:matmul(embeddings:t()):cpu()
local n = similarity:size(1)
print(string.format("%d sentences, %d-dimensional embeddings, on %s", n, embeddings:size(2), device))

for i = 1, n do
  local best, score = nil, -math.huge
  for j = 1, n do
    local s = similarity[i][j]:item()
    if j ~= i and s > score then best, score = j, s end
  end
  if best then print(string.format("%.3f  %s  ~  %s", score, label(i), label(best))) end
end

if n <= 8 then
  for i = 1, n do
    local row = {}
    for j = 1, n do row[j] = string.format("%6.3f", similarity[i][j]:item()) end
    print(table.concat(row, " ") .. "  " .. label(i))
  end
end
