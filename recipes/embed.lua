-- Sentence embeddings from a BERT checkpoint folder (sentence-transformers'
-- all-MiniLM-L6-v2, say), as sentence-transformers computes them: the mean
-- of last_hidden_state over the real tokens, L2-normalized. Prints each
-- sentence's nearest other sentence by cosine similarity, and the whole
-- similarity table for a few sentences.
--   accel-run recipes/embed.lua -- MODEL_DIR SENTENCES_TXT
-- SENTENCES_TXT holds one sentence a line; the folder's own tokenizer
-- (accel.tokenizers) turns them into ids, as sentence-transformers does,
-- cut at 256 tokens.
local usage = "usage: accel-run recipes/embed.lua -- MODEL_DIR SENTENCES_TXT"
local model_dir, sentences_file = assert(arg[1], usage), assert(arg[2], usage)
local F = accel.nn.functional

local sentences = {}
for line in io.lines(sentences_file) do
  if line ~= "" then sentences[#sentences + 1] = line end
end
local function label(i)
  local text = sentences[i]
  return #text > 60 and (text:sub(1, 57) .. "...") or text
end

local device = accel.cuda.is_available() and "cuda:0" or "cpu"
local model = accel.models.from_pretrained(model_dir):to(device)
local tok = accel.tokenizers.from_pretrained(model_dir)
local batch = tok(sentences, { padding = true, truncation = true, max_length = 256 })
local ids, mask = batch.input_ids:to(device), batch.attention_mask:to(device)
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
