-- accel.models' GPT-2 (GPT2LMHeadModel) and BERT (BertModel) on tiny fresh
-- models: transformers' parameter names and shapes, GPT-2's initialisation,
-- the loss, the key/value cache, BERT's padding mask and mean pooling, the
-- save_pretrained -> from_pretrained round trip (extra names in a
-- checkpoint ignored), and errors that name what is wrong. Equality with
-- transformers itself is checked against tests/models/make_checkpoints.py's
-- references, where transformers is installed.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local ck = require("accel.core").formats
local F = accel.nn.functional

accel.set_seed(7)

local root = os.tmpname()
os.remove(root)
ck.make_empty_folder(root)

-- name -> shape (as "[a, b]") of a model's state dict.
local function shapes(model)
  local out = {}
  for name, t in pairs(model:state_dict()) do out[name] = table.concat(t:size(), ", ") end
  return out
end

local function same_names(actual, expected, what)
  local missing, extra = {}, {}
  for name, shape in pairs(expected) do
    if actual[name] == nil then missing[#missing + 1] = name
    else check.equal(actual[name], shape, what .. ": shape of " .. name) end
  end
  for name in pairs(actual) do
    if expected[name] == nil then extra[#extra + 1] = name end
  end
  table.sort(missing)
  table.sort(extra)
  check.equal(table.concat(missing, " ") .. "|" .. table.concat(extra, " "), "|", what .. ": missing|extra names")
end

-- The checkpoint of `dir` with `extra` ({name = tensor}) added, as older
-- transformers wrote buffers the model does not have.
local function add_to_checkpoint(dir, extra)
  local file = dir .. "/model.safetensors"
  local pairs_list = {}
  for name, t in pairs(ck.read_safetensors(file)) do pairs_list[#pairs_list + 1] = { name, t } end
  for name, t in pairs(extra) do pairs_list[#pairs_list + 1] = { name, t } end
  ck.write_safetensors(file, pairs_list)
end

local function max_diff(a, b) return (a - b):abs():max():item() end

---------------------------------------------------------------------------
-- GPT-2
local V, E, L, P = 32, 16, 2, 24
local gpt2_config = { model_type = "gpt2", vocab_size = V, n_embd = E, n_layer = L, n_head = 2, n_positions = P,
                      initializer_range = 0.2 }
local gpt2 = accel.models.from_config(gpt2_config):eval()

local expected = { ["transformer.wte.weight"] = V .. ", " .. E, ["transformer.wpe.weight"] = P .. ", " .. E,
                   ["transformer.ln_f.weight"] = tostring(E), ["transformer.ln_f.bias"] = tostring(E) }
for i = 0, L - 1 do
  local h = "transformer.h." .. i .. "."
  for name, shape in pairs({ ["ln_1.weight"] = E, ["ln_1.bias"] = E, ["ln_2.weight"] = E, ["ln_2.bias"] = E,
                             ["attn.c_attn.weight"] = E .. ", " .. 3 * E, ["attn.c_attn.bias"] = 3 * E,
                             ["attn.c_proj.weight"] = E .. ", " .. E, ["attn.c_proj.bias"] = E,
                             ["mlp.c_fc.weight"] = E .. ", " .. 4 * E, ["mlp.c_fc.bias"] = 4 * E,
                             ["mlp.c_proj.weight"] = 4 * E .. ", " .. E, ["mlp.c_proj.bias"] = E }) do
    expected[h .. name] = tostring(shape)
  end
end
same_names(shapes(gpt2), expected, "GPT-2 state dict (Conv1D weights [in, out], lm_head tied)")
check.truthy(rawequal(gpt2.lm_head.weight, gpt2.transformer.wte.weight), "lm_head is wte's weight (tied by default)")
check.equal(gpt2.config.activation_function, "gelu_new", "GPT2Config's defaults fill the config")
local untied = accel.models.from_config({ model_type = "gpt2", vocab_size = V, n_embd = E, n_layer = 1, n_head = 2,
                                          tie_word_embeddings = false })
check.truthy(untied:state_dict()["lm_head.weight"] ~= nil, "tie_word_embeddings = false keeps lm_head.weight")

-- transformers' GPT-2 init: N(0, 0.2^2) weights, the residual projections
-- 0.2 / sqrt(2 * n_layer), zero biases.
local wide = accel.models.from_config({ model_type = "gpt2", vocab_size = V, n_embd = 64, n_layer = 2, n_head = 2,
                                        initializer_range = 0.2 })
local block = wide.transformer.h[1]
check.near(block.mlp.c_fc.weight:std():item(), 0.2, 0.05, "c_fc weight std")
check.near(block.mlp.c_proj.weight:std():item(), 0.1, 0.05, "mlp.c_proj std: initializer_range / sqrt(2 n_layer)")
check.near(block.attn.c_proj.weight:std():item(), 0.1, 0.05, "attn.c_proj std: initializer_range / sqrt(2 n_layer)")
check.equal(block.attn.c_attn.bias:abs():max():item(), 0, "Conv1D biases start at zero")
check.equal(block.ln_1.weight:min():item(), 1, "LayerNorm weights start at one")

-- Logits and the shifted language-model loss (label -100 ignored).
local ids = accel.LongTensor({ { 5, 9, 3, 17, 30, 2 }, { 0, 1, 8, 8, 21, 4 } })
local labels = ids:clone()
labels[2][1] = -100
local out = gpt2{ input_ids = ids, labels = labels }
check.equal(table.concat(out.logits:size(), "x"), "2x6x" .. V, "logits (batch, sequence, vocab)")
local log_probs = F.log_softmax(out.logits, -1)
local sum, count = 0, 0
for b = 1, 2 do
  for t = 1, 5 do
    local label = labels[b][t + 1]:item()
    if label ~= -100 then sum, count = sum - log_probs[b][t][label + 1]:item(), count + 1 end
  end
end
check.near(out.loss:item(), sum / count, 1e-5, "loss: mean cross-entropy of label t + 1 at position t")

-- The key/value cache: the prompt, then one token at a time, gives the
-- logits of one whole forward.
local KVCache = require("accel.models.kv_cache")
local cache = KVCache()
local prompt = gpt2{ input_ids = ids:narrow(2, 1, 4), past_key_values = cache }.logits
local step5 = gpt2{ input_ids = ids:narrow(2, 5, 1), past_key_values = cache }.logits
local step6 = gpt2{ input_ids = ids:narrow(2, 6, 1), past_key_values = cache }.logits
local stepped = accel.cat({ prompt, step5, step6 }, 2)
check.truthy(max_diff(stepped, out.logits) < 1e-5, "cached steps equal the whole forward")
check.equal(cache:length(), 6, "the cache holds every position")

-- Dropout (pdrop 0.1 by default) in training mode only; the loss reaches
-- every parameter (the tied embedding once).
gpt2:train()
check.truthy(max_diff(gpt2{ input_ids = ids }.logits, out.logits) > 0, "training mode drops out")
gpt2{ input_ids = ids, labels = labels }.loss:backward()
local without_grad = {}
for name, p in gpt2:named_parameters() do
  if p.grad == nil or p.grad:abs():sum():item() == 0 then without_grad[#without_grad + 1] = name end
end
check.equal(table.concat(without_grad, " "), "", "parameters the loss gives no gradient")
gpt2:zero_grad()
gpt2:eval()
check.equal(max_diff(gpt2{ input_ids = ids }.logits, out.logits), 0, "eval mode is deterministic")

-- The round trip, also with the buffers older transformers saved (ignored).
local gpt2_dir = root .. "/gpt2"
gpt2:save_pretrained(gpt2_dir)
add_to_checkpoint(gpt2_dir, { ["transformer.h.0.attn.bias"] = accel.ones(1, 1, P, P),
                              ["transformer.h.0.attn.masked_bias"] = accel.tensor(-1e4) })
local loaded = accel.models.from_pretrained(gpt2_dir)
check.equal(loaded.__name, "GPT2LMHeadModel", "from_pretrained picks GPT-2 by model_type")
check.equal(max_diff(loaded{ input_ids = ids }.logits, out.logits), 0,
            "save_pretrained -> from_pretrained: same logits")
check.truthy(rawequal(loaded.lm_head.weight, loaded.transformer.wte.weight), "tied after loading")

-- transformers' common names (GPT2Config's attribute_map) become GPT-2's own.
local aliased = accel.models.from_config({ model_type = "gpt2", vocab_size = V, hidden_size = E, num_hidden_layers = 1,
                                           num_attention_heads = 2, max_position_embeddings = 8 })
check.equal(aliased.config.n_embd, E, "hidden_size is n_embd")
check.equal(aliased.config.hidden_size, nil, "saved under GPT-2's name only")
check.equal(aliased.transformer.wpe.weight:size(1), 8, "max_position_embeddings is n_positions")

-- Errors name the input, id, key or file at fault.
check.raises(function() gpt2{ input_ids = ids, token_type_ids = ids } end, "unknown input",
             "unknown input 'token_type_ids'")
check.raises(function() gpt2{ input_ids = accel.LongTensor({ { 1, V } }) } end, "id out of the vocabulary",
             "token id " .. V, "vocab_size " .. V)
check.raises(function() gpt2{ input_ids = accel.zeros(1, P + 1):long() } end, "past n_positions",
             "position " .. P, "n_positions " .. P)
check.raises(function() gpt2{ input_ids = ids:float() } end, "float ids", "integer tensor")
check.raises(function() accel.models.from_config({ model_type = "gpt2", vocab_size = V, n_layer = 1, n_head = 2 }) end,
             "a size missing", "missing key 'n_embd'")
check.raises(function()
  accel.models.from_config({ model_type = "gpt2", vocab_size = V, n_embd = E, n_layer = 1, n_head = 2,
                             activation_function = "gelu_wrong" })
end, "unknown activation", "activation_function 'gelu_wrong'", "gelu_new")
check.raises(function()
  accel.models.from_config({ model_type = "gpt2", vocab_size = V, n_embd = E, n_layer = 1, n_head = 3 })
end, "heads not dividing n_embd", "n_embd 16 is not a multiple of n_head 3")

---------------------------------------------------------------------------
-- BERT
local H, I = 16, 32
local bert_config = { model_type = "bert", vocab_size = V, hidden_size = H, num_hidden_layers = L,
                      num_attention_heads = 2, intermediate_size = I, max_position_embeddings = P }
local bert = accel.models.from_config(bert_config):eval()
expected = { ["embeddings.word_embeddings.weight"] = V .. ", " .. H,
             ["embeddings.position_embeddings.weight"] = P .. ", " .. H,
             ["embeddings.token_type_embeddings.weight"] = 2 .. ", " .. H,
             ["embeddings.LayerNorm.weight"] = tostring(H), ["embeddings.LayerNorm.bias"] = tostring(H),
             ["pooler.dense.weight"] = H .. ", " .. H, ["pooler.dense.bias"] = tostring(H) }
for i = 0, L - 1 do
  local layer = "encoder.layer." .. i .. "."
  for name, shape in pairs({ ["attention.self.query"] = H .. ", " .. H, ["attention.self.key"] = H .. ", " .. H,
                             ["attention.self.value"] = H .. ", " .. H, ["attention.output.dense"] = H .. ", " .. H,
                             ["intermediate.dense"] = I .. ", " .. H, ["output.dense"] = H .. ", " .. I }) do
    expected[layer .. name .. ".weight"] = shape
    expected[layer .. name .. ".bias"] = shape:match("^(%d+)")
  end
  for _, norm in ipairs({ "attention.output.LayerNorm", "output.LayerNorm" }) do
    expected[layer .. norm .. ".weight"], expected[layer .. norm .. ".bias"] = tostring(H), tostring(H)
  end
end
same_names(shapes(bert), expected, "BERT state dict")
check.equal(bert.embeddings.word_embeddings.weight[1]:abs():max():item(), 0, "the padding token's row (id 0) is zero")
local no_pooler = require("accel.models.bert").BertModel(bert.config, { add_pooling_layer = false })
check.equal(no_pooler:state_dict()["pooler.dense.weight"], nil, "add_pooling_layer = false has no pooler")

-- Right padding changes nothing for the real tokens, and mean pooling
-- averages those.
local sentence = accel.LongTensor({ { 2, 11, 7, 25, 3 } })
local padded = accel.cat({ sentence, accel.zeros(1, 3):long() }, 2)
local mask = accel.LongTensor({ { 1, 1, 1, 1, 1, 0, 0, 0 } })
local alone = bert{ input_ids = sentence }
local with_padding = bert{ input_ids = padded, attention_mask = mask, token_type_ids = accel.zeros(1, 8):long() }
check.truthy(max_diff(with_padding.last_hidden_state:narrow(2, 1, 5), alone.last_hidden_state) < 1e-5,
             "padding keys are masked")
check.truthy(max_diff(with_padding.pooler_output, alone.pooler_output) < 1e-5, "pooler: the first token's state")
local pooled = accel.models.mean_pooling(with_padding.last_hidden_state, mask)
check.truthy(max_diff(pooled, alone.last_hidden_state:mean(2)) < 1e-5, "mean pooling over the unmasked tokens")
local embedding = F.normalize(pooled, { dim = -1 })
check.near(embedding:norm(2, -1):item(), 1, 1e-6, "normalized embeddings have unit length")
check.equal(bert{ input_ids = padded, attention_mask = mask }.pooler_output:size(2), H, "pooler_output (batch, hidden)")

-- The round trip, also with the position_ids buffer older checkpoints hold.
local bert_dir = root .. "/bert"
bert:save_pretrained(bert_dir)
add_to_checkpoint(bert_dir, { ["embeddings.position_ids"] = accel.arange(0, P):long():view(1, P) })
local loaded_bert = accel.models.from_pretrained(bert_dir)
check.equal(loaded_bert.__name, "BertModel", "from_pretrained picks BERT by model_type")
check.equal(max_diff(loaded_bert{ input_ids = padded, attention_mask = mask }.last_hidden_state,
                     with_padding.last_hidden_state), 0, "save_pretrained -> from_pretrained: same states")

check.raises(function() bert{ input_ids = padded, labels = padded } end, "unknown input", "unknown input 'labels'")
check.raises(function() bert{ input_ids = accel.LongTensor({ { 1, V + 3 } }) } end, "id out of the vocabulary",
             "token id " .. V + 3, "vocab_size " .. V)
check.raises(function() bert{ input_ids = sentence, token_type_ids = accel.LongTensor({ { 0, 0, 2, 0, 0 } }) } end,
             "token type out of range", "token type id 2", "type_vocab_size 2")
check.raises(function() bert{ input_ids = sentence, attention_mask = mask } end, "mask of another shape",
             "attention_mask must be (batch, sequence) = (1, 5)")
check.raises(function() accel.models.mean_pooling(with_padding.last_hidden_state, sentence) end,
             "mean pooling's mask", "attention_mask must be (batch, sequence) = (1, 8)")
check.raises(function()
  local cfg = {}
  for k, v in pairs(bert_config) do cfg[k] = v end
  cfg.is_decoder = true
  accel.models.from_config(cfg)
end, "decoder BERT", "is_decoder")

ck.remove_folder(root)
check.done("test_models_gpt2_bert")
