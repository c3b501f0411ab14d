-- accel.models without the transformers oracle: building, saving and
-- loading Hugging Face folders, the inputs table, generation's options, and
-- bad input (an unknown model_type, a missing key, missing or mis-shaped
-- weights, ids outside the vocabulary), each a clear error naming the file
-- and the key, tensor or id.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local ck = require("accel.core").formats
local json = require("accel.core").json

local work = os.tmpname()
os.remove(work)
ck.make_empty_folder(work)

local tiny = { model_type = "llama", vocab_size = 32, hidden_size = 16, intermediate_size = 32,
               num_hidden_layers = 2, num_attention_heads = 4, num_key_value_heads = 2 }

accel.set_seed(1)
local model = accel.models.from_config(tiny)
check.equal(model.__name, "LlamaForCausalLM", "from_config picks the class by model_type")
check.near(model.model.layers[1].input_layernorm.weight:sum():item(), 16, 0, "norms start at ones")
local std = model.model.layers[1].mlp.up_proj.weight:std():item()
check.truthy(std > 0.015 and std < 0.025, "linear weights are N(0, 0.02^2) as transformers initialises them: " .. std)
local names = {}
for name in model:named_parameters() do names[#names + 1] = name end
check.equal(names[1], "model.embed_tokens.weight", "the checkpoints' names")
check.equal(names[2], "model.layers.0.self_attn.q_proj.weight", "layers are numbered from 0")

local ids = accel.LongTensor({ { 3, 4, 5, 6 }, { 0, 0, 7, 8 } })
local mask = accel.LongTensor({ { 1, 1, 1, 1 }, { 0, 0, 1, 1 } })
-- skip_logits = false: in training mode the loss would come in chunks, without logits.
local out = model{ input_ids = ids, attention_mask = mask, labels = ids, skip_logits = false }
check.equal(table.concat(out.logits:size(), "x"), "2x4x32", "logits are (batch, sequence, vocab)")
check.truthy(out.loss:item() > 0, "a loss with labels")
local labels = ids:clone()
labels[2][1], labels[2][2] = -100, -100
local masked = model{ input_ids = ids, attention_mask = mask, labels = labels }
check.truthy(math.abs(masked.loss:item() - out.loss:item()) > 1e-6, "labels of -100 are left out of the loss")
out.loss:backward()
check.truthy(model.lm_head.weight.grad ~= nil, "the loss trains the model")

-- save_pretrained and from_pretrained: the same outputs, config kept.
model:save_pretrained(work .. "/tiny")
local loaded = accel.models.from_pretrained(work .. "/tiny")
check.truthy(not loaded.training, "from_pretrained returns the model in eval mode")
model:eval()
local a = model{ input_ids = ids, attention_mask = mask }.logits
local b = loaded{ input_ids = ids, attention_mask = mask }.logits
check.near((a - b):abs():max():item(), 0, 0, "a saved and reloaded model computes the same logits")
local cfg = accel.models.config(work .. "/tiny")
check.equal(cfg.architectures[1], "LlamaForCausalLM", "config.json names the architecture")
check.equal(cfg.rms_norm_eps, 1e-6, "config.json holds transformers' defaults")
check.truthy(json.read(work .. "/tiny/config.json") ~= nil, "config.json is JSON")
local text = io.open(work .. "/tiny/config.json"):read("*a")
check.truthy(text:find('"attention_dropout": 0.0', 1, true), "floats are written as decimals")

-- Tied embeddings are saved once, as transformers saves them.
local tied_cfg = {}
for k, v in pairs(tiny) do tied_cfg[k] = v end
tied_cfg.tie_word_embeddings = true
local tied = accel.models.from_config(tied_cfg)
check.truthy(rawequal(tied.lm_head.weight, tied.model.embed_tokens.weight), "tied embeddings are one tensor")
tied:save_pretrained(work .. "/tied")
local saved = ck.read_safetensors(work .. "/tied/model.safetensors")
check.truthy(saved["lm_head.weight"] == nil and saved["model.embed_tokens.weight"] ~= nil,
             "a tied lm_head is not written")
local tied_loaded = accel.models.from_pretrained(work .. "/tied")
check.truthy(rawequal(tied_loaded.lm_head.weight, tied_loaded.model.embed_tokens.weight),
             "and loads tied again")

-- generation_config.json gives generate its defaults and is saved again.
ck.write_text(work .. "/tiny/generation_config.json", '{"max_new_tokens": 3, "eos_token_id": 31, "temperature": 0.5}')
local with_defaults = accel.models.from_pretrained(work .. "/tiny")
check.equal(with_defaults:generate(ids, { attention_mask = mask, min_new_tokens = 3 }):size(2), 7,
            "generation_config.json's max_new_tokens is generate's default")
with_defaults:save_pretrained(work .. "/tiny-again")
local again = json.read(work .. "/tiny-again/generation_config.json")
check.equal(again.max_new_tokens, 3, "save_pretrained writes generation_config.json back")
check.truthy(io.open(work .. "/tiny-again/generation_config.json"):read("*a"):find('"temperature": 0.5', 1, true),
             "with its values")

-- Generation: greedy is deterministic, eos stops a row, then pads it.
local g1 = loaded:generate(ids, { attention_mask = mask, max_new_tokens = 6, eos_token_id = 31, pad_token_id = 0 })
local g2 = loaded:generate(ids, { attention_mask = mask, max_new_tokens = 6, eos_token_id = 31, pad_token_id = 0 })
check.truthy(g1:equal(g2), "greedy decoding is deterministic")
check.truthy(g1:size(2) <= 10 and g1:size(2) > 4, "generate appends at most max_new_tokens")
local first = g1[1][5]:item()
local forced = loaded:generate(ids, { attention_mask = mask, max_new_tokens = 6, eos_token_id = first, pad_token_id = 30 })
check.equal(forced[1][5]:item(), first, "the row's eos token is kept")
for i = 6, forced:size(2) do check.equal(forced[1][i]:item(), 30, "a row that ended is padded with pad_token_id") end
local alone = loaded:generate(ids:narrow(1, 1, 1), { attention_mask = mask:narrow(1, 1, 1), max_new_tokens = 6,
                                                     eos_token_id = first })
check.equal(alone:size(2), 5, "generation stops when every row has ended")
accel.set_seed(3)
local s1 = loaded:generate(ids, { attention_mask = mask, max_new_tokens = 5, do_sample = true, top_k = 5, top_p = 0.9,
                                  temperature = 0.7, repetition_penalty = 1.3 })
check.equal(s1:size(2), 9, "sampling with temperature, top-k, top-p and a repetition penalty")
check.truthy(s1:min():item() >= 0 and s1:max():item() < 32, "sampled ids are in the vocabulary")

-- Bad input, each naming the thing at fault.
check.raises(function() loaded{ input_ids = accel.LongTensor({ { 1, 32 } }) } end, "an id past the vocabulary",
             "token id 32 is outside the vocabulary", "vocab_size 32", work .. "/tiny/config.json")
check.raises(function() loaded{ input_ids = accel.LongTensor({ { -1, 2 } }) } end, "a negative id", "token id -1")
check.raises(function() loaded{ input_ids = accel.tensor({ { 1, 2 } }) } end, "float ids", "integer tensor")
check.raises(function() loaded{ input_ids = ids, attention = mask } end, "an unknown input", "unknown input 'attention'")
check.raises(function() loaded{ input_ids = ids, attention_mask = accel.ones(2, 3):long() } end, "a mask of another shape",
             "attention_mask must be (batch, past + sequence) = (2, 4)")
check.raises(function() loaded:generate(ids, { max_new_tokens = 2, top_p = 1.5 }) end, "top_p out of range", "top_p")
check.raises(function() loaded:generate(ids, { max_tokens = 2 }) end, "an unknown generate option", "unknown option 'max_tokens'")

local function write_config(dir, t)
  ck.make_empty_folder(dir)
  ck.write_text(dir .. "/config.json", json.encode(t))
end
write_config(work .. "/unknown", { model_type = "llamax", vocab_size = 3 })
check.raises(function() accel.models.from_pretrained(work .. "/unknown") end, "an unknown model_type",
             work .. "/unknown/config.json", "model_type 'llamax'", "llama, mistral")
write_config(work .. "/missing", { model_type = "llama", vocab_size = 32, hidden_size = 16, intermediate_size = 32,
                                   num_attention_heads = 4 })
check.raises(function() accel.models.from_pretrained(work .. "/missing") end, "a missing key",
             work .. "/missing/config.json", "missing key 'num_hidden_layers'")
write_config(work .. "/wrongtype", { model_type = "llama", vocab_size = "32", hidden_size = 16, intermediate_size = 32,
                                     num_attention_heads = 4, num_hidden_layers = 1 })
check.raises(function() accel.models.from_pretrained(work .. "/wrongtype") end, "a key of the wrong type",
             "key 'vocab_size' must be a positive integer")
local rope_base = { model_type = "llama", vocab_size = 32, hidden_size = 16, intermediate_size = 32,
                    num_attention_heads = 4, num_hidden_layers = 1 }
rope_base.rope_scaling = { rope_type = "longrope", factor = 2 }
check.raises(function() accel.models.from_config(rope_base) end, "an unsupported rope_scaling type",
             "rope_scaling type 'longrope' is not supported", "yarn")
rope_base.rope_scaling = { rope_type = "yarn", factor = 4 }
check.raises(function() accel.models.from_config(rope_base) end, "yarn without its original context",
             "needs a number 'original_max_position_embeddings'")
-- Without factor, YaRN's is max_position_embeddings over the original context.
rope_base.rope_scaling = { rope_type = "yarn", original_max_position_embeddings = 8 }
rope_base.max_position_embeddings = 32
local derived = accel.models.from_config(rope_base).model.rotary_emb
rope_base.rope_scaling = { rope_type = "yarn", original_max_position_embeddings = 8, factor = 4 }
local given = accel.models.from_config(rope_base).model.rotary_emb
local positions = accel.LongTensor({ { 0, 5, 31 } })
check.near(derived(positions), given(positions), 0, "yarn's factor defaults to max_position_embeddings / original")
check.near(derived.attention_factor, 0.1 * math.log(4) + 1, 1e-12, "and sets the attention factor")
ck.make_empty_folder(work .. "/broken")
ck.write_text(work .. "/broken/config.json", '{"model_type": "llama",}')
check.raises(function() accel.models.from_pretrained(work .. "/broken") end, "config.json that is not JSON",
             work .. "/broken/config.json")
check.raises(function() accel.models.from_pretrained(work .. "/nowhere") end, "a folder that is not there", "is not a folder")

-- Weights missing or of another shape than the config says.
local state = {}
for name, p in loaded:named_parameters() do
  if name ~= "model.norm.weight" then state[#state + 1] = { name, p:detach() } end
end
write_config(work .. "/noweight", json.decode(text, "config.json"))
ck.write_safetensors(work .. "/noweight/model.safetensors", state)
check.raises(function() accel.models.from_pretrained(work .. "/noweight") end, "a missing weight", "model.norm.weight")
local wider = json.decode(text, "config.json")
wider.intermediate_size = 48
write_config(work .. "/misshaped", wider)
ck.save_weights(work .. "/misshaped", require("accel.checkpointing.layout").ordered_state(loaded))
check.raises(function() accel.models.from_pretrained(work .. "/misshaped") end, "a weight of another shape",
             "model.layers.0.mlp.gate_proj.weight", "48")

-- Checkpoints named with or without the base model's prefix, as
-- transformers loads them: GPT-2's own files hold "h.0.attn..." (a bare
-- GPT2Model's names), a BertForMaskedLM's "bert.encoder..." and its head.
local function renamed(dir, from, rename, extra)
  local weights = ck.read_safetensors(from .. "/model.safetensors")
  local pairs_list = {}
  for name, t in pairs(weights) do pairs_list[#pairs_list + 1] = { rename(name), t } end
  if extra then pairs_list[#pairs_list + 1] = extra end
  write_config(dir, json.decode(io.open(from .. "/config.json"):read("*a"), "config.json"))
  ck.write_safetensors(dir .. "/model.safetensors", pairs_list)
end
local gpt2 = accel.models.from_config({ model_type = "gpt2", vocab_size = 40, n_embd = 16, n_layer = 2, n_head = 2 }):eval()
gpt2:save_pretrained(work .. "/gpt2")
renamed(work .. "/gpt2-bare", work .. "/gpt2", function(name) return (name:gsub("^transformer%.", "")) end)
local bare = accel.models.from_pretrained(work .. "/gpt2-bare")
local gids = accel.LongTensor({ { 1, 2, 3 } })
check.near((bare{ input_ids = gids }.logits - gpt2{ input_ids = gids }.logits):abs():max():item(), 0, 0,
           "a bare GPT2Model's checkpoint (no 'transformer.' prefix) loads into GPT2LMHeadModel")
local bert = accel.models.from_config({ model_type = "bert", vocab_size = 40, hidden_size = 16, num_hidden_layers = 1,
                                        num_attention_heads = 2, intermediate_size = 32 }):eval()
bert:save_pretrained(work .. "/bert")
renamed(work .. "/bert-mlm", work .. "/bert", function(name) return "bert." .. name end,
        { "cls.predictions.bias", accel.zeros(40) })
local mlm = accel.models.from_pretrained(work .. "/bert-mlm")
check.near((mlm{ input_ids = gids }.last_hidden_state - bert{ input_ids = gids }.last_hidden_state):abs():max():item(),
           0, 0, "a BertForMaskedLM's checkpoint ('bert.' prefix, a head) loads into BertModel")

-- device_map = "auto" keeps tied weights together: the lm_head sharing the
-- embedding goes where the embedding went, though memory runs out before it.
accel.set_seed(0)
local qwen = accel.models.from_config({ model_type = "qwen2", vocab_size = 512, hidden_size = 64,
                                        intermediate_size = 128, num_hidden_layers = 4, num_attention_heads = 4,
                                        num_key_value_heads = 2, tie_word_embeddings = true }):eval()
qwen:save_pretrained(work .. "/qwen")
local small = accel.models.from_pretrained(work .. "/qwen", { device_map = "auto", max_memory = { cpu = 300000 },
                                                             offload_folder = work .. "/offload" })
check.truthy(rawequal(small.lm_head.weight, small.model.embed_tokens.weight),
             "a tied lm_head stays one tensor with the embedding under device_map = \"auto\"")
check.near((small{ input_ids = gids }.logits - qwen{ input_ids = gids }.logits):abs():max():item(), 0, 0,
           "and the model, partly on disk, computes the same logits")

ck.remove_folder(work)
check.done("test_models")
