-- accel.peft without the PEFT oracle (tests/models/test_peft_parity.sh has
-- it): PEFT's state_dict and file names, the frozen base (no gradients, no
-- optimizer state, not among parameters, still in state_dict), PEFT's
-- trainable counts and wording, LoRA's initialisation, scaling and forward,
-- save_pretrained/from_pretrained, merge_and_unload, unload,
-- disable_adapter, target_modules' matching rules (names, regexes,
-- all-linear, model_type defaults), bias and modules_to_save, and bad
-- configs and folders, each a clear error naming the key or file.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local core = require("accel.core")
local ck, json = core.formats, core.json
local peft, nn = accel.peft, accel.nn

local work = os.tmpname()
os.remove(work)
ck.make_empty_folder(work)

-- 2 layers, hidden 16, head_dim 8, one key/value head: q_proj 16x16, k_proj and v_proj 8x16.
local tiny = { model_type = "llama", vocab_size = 32, hidden_size = 16, intermediate_size = 32,
               num_hidden_layers = 2, num_attention_heads = 2, num_key_value_heads = 1 }
local function base(cfg)
  accel.set_seed(1)
  return accel.models.from_config(cfg or tiny)
end

local ids = accel.LongTensor({ { 3, 4, 5, 6, 7 }, { 8, 9, 10, 11, 12 } })
local function logits(model)
  return accel.no_grad(function() return model{ input_ids = ids }.logits end)
end
local function max_diff(a, b) return (a - b):abs():max():item() end

local function names_of(iterator_owner)
  local out = {}
  for name in iterator_owner:named_parameters() do out[#out + 1] = name end
  return out
end

-- Names and freezing ---------------------------------------------------------
local plain = base()
local before = logits(plain)
local total = plain:num_parameters()
check.equal(total, 5712, "the tiny Llama has 5,712 parameters")
local config = peft.LoraConfig{ r = 2, lora_alpha = 4, target_modules = { "q_proj", "v_proj" } }
local model = peft.get_peft_model(plain, config)
local state = model:state_dict()
for _, name in ipairs({ "base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight",
                        "base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight",
                        "base_model.model.model.layers.1.self_attn.v_proj.lora_B.default.weight",
                        "base_model.model.model.embed_tokens.weight", "base_model.model.lm_head.weight" }) do
  check.truthy(state[name] ~= nil, "state_dict has PEFT's name " .. name)
end
check.equal(state["base_model.model.model.layers.0.self_attn.q_proj.weight"], nil,
            "a wrapped layer's weight moves under base_layer, as PEFT names it")
local trainable_names = names_of(model)
check.equal(#trainable_names, 8, "parameters(): lora_A and lora_B of 4 layers, nothing else")
for _, name in ipairs(trainable_names) do
  check.truthy(name:find("%.lora_[AB]%.default%.weight$") ~= nil, "only adapters are parameters: " .. name)
end
for name, t in pairs(state) do
  if not name:find("lora_") then check.equal(t.requires_grad, false, "the base is frozen: " .. name) end
end
check.equal(model.base_model.model.model.layers[1].self_attn.q_proj.__name, "LoraLinear", "targets are wrapped")
check.equal(model.base_model.model.model.layers[1].self_attn.k_proj.__name, "Linear", "others are not")

-- Counts as PEFT counts and prints them: 4 layers of (r x in) + (out x r): q 2*16 + 16*2, v 2*16 + 8*2.
local trainable, all = model:get_nb_trainable_parameters()
check.equal(trainable, 224, "trainable: the adapters' 224 elements")
check.equal(all, total + 224, "all: the frozen base and the adapters")
local printed
local real_print = print
print = function(...) printed = table.concat({ ... }, "\t") end
model:print_trainable_parameters()
print = real_print
check.equal(printed, "trainable params: 224 || all params: 5,936 || trainable%: 3.7736", "PEFT's wording")

-- Initialisation and forward ---------------------------------------------------
local layer = model.base_model.model.model.layers[1].self_attn.q_proj
check.equal(layer.lora_B.default.weight:abs():sum():item(), 0, "lora_B starts at zero")
check.truthy(layer.lora_A.default.weight:abs():max():item() <= 1 / math.sqrt(16),
             "lora_A is kaiming_uniform(a = sqrt(5)): within 1/sqrt(in_features)")
check.truthy(layer.lora_A.default.weight:abs():max():item() > 0.5 / math.sqrt(16), "and fills that range")
check.equal(max_diff(logits(model), before), 0, "a fresh adapter leaves the outputs as they were")
check.equal(layer.weight, layer.base_layer.weight, "a LoRA layer's weight is its base layer's, as in PEFT")
check.equal(model.config.model_type, "llama", "the PeftModel answers for the model (config)")
accel.no_grad(function() layer.lora_B.default.weight:normal_(0, 0.5) end)
local x = accel.randn(3, 16)
local by_hand = accel.nn.functional.linear(x, layer.base_layer.weight)
  + x:matmul(layer.lora_A.default.weight:t()):matmul(layer.lora_B.default.weight:t()) * (4 / 2)
check.near(max_diff(layer(x), by_hand), 0, 1e-6, "forward = base(x) + lora_B(lora_A(x)) * lora_alpha / r")
accel.no_grad(function() layer.lora_B.default.weight:zero_() end)

for _, case in ipairs({ { false, 4 / 2 }, { true, 4 / math.sqrt(2) } }) do
  local m = peft.get_peft_model(base(), peft.LoraConfig{ r = 2, lora_alpha = 4, use_rslora = case[1],
                                                        target_modules = { "q_proj" } })
  check.near(m.base_model.model.model.layers[1].self_attn.q_proj.scaling, case[2], 1e-12,
             "scaling with use_rslora = " .. tostring(case[1]))
end
check.equal(layer.lora_dropout.default.__name, "Identity", "lora_dropout 0: nn.Identity, as PEFT")
local dropped = peft.get_peft_model(base(), peft.LoraConfig{ target_modules = { "q_proj" }, lora_dropout = 0.25 })
check.near(dropped.base_model.model.model.layers[1].self_attn.q_proj.lora_dropout.default.p, 0.25, 0,
           "lora_dropout: nn.Dropout on the adapter's input")
local random_b = peft.get_peft_model(base(), peft.LoraConfig{ target_modules = { "q_proj" },
                                                             init_lora_weights = false })
check.truthy(random_b.base_model.model.model.layers[1].self_attn.q_proj.lora_B.default.weight:abs():sum():item() > 0,
             "init_lora_weights = false leaves lora_B random, as PEFT does")
local gaussian = peft.get_peft_model(base(), peft.LoraConfig{ r = 4, target_modules = { "up_proj" },
                                                             init_lora_weights = "gaussian" })
local a = gaussian.base_model.model.model.layers[1].mlp.up_proj.lora_A.default.weight
check.truthy(math.abs(a:std():item() - 0.25) < 0.1, "gaussian: lora_A is N(0, 1/r^2): std " .. a:std():item())

-- Training: gradients reach the adapters only; the optimizer holds them alone.
model:train()
local opt = accel.optim.AdamW(model:parameters(), { lr = 0.01 })
for step = 1, 3 do
  local loss = model{ input_ids = ids, labels = ids }.loss
  loss:backward()
  if step == 1 then
    check.truthy(layer.lora_B.default.weight.grad:abs():sum():item() > 0, "lora_B takes a gradient at once")
    for name, t in pairs(model:state_dict()) do
      if not name:find("lora_") then check.equal(t.grad, nil, "no gradient memory for frozen " .. name) end
    end
  end
  opt:step()
  opt:zero_grad()
end
local slots = 0
for name in pairs(opt:state_dict()) do
  if name:match("^state%.%d+%.exp_avg$") then slots = slots + 1 end
end
check.equal(slots, 8, "AdamW keeps state for the 8 adapter tensors only")
check.truthy(layer.lora_A.default.weight.grad == nil and layer.lora_B.default.weight:abs():sum():item() > 0,
             "training moved lora_B")
model:eval()
local trained = logits(model)
check.truthy(max_diff(trained, before) > 1e-3, "the trained adapter changes the outputs")

-- disable_adapter --------------------------------------------------------------
local off, extra = model:disable_adapter(function() return logits(model), "second" end)
check.equal(max_diff(off, before), 0, "disable_adapter runs the base model")
check.equal(extra, "second", "disable_adapter returns every result of fn")
check.equal(max_diff(logits(model), trained), 0, "the adapters are back on afterwards")
check.raises(function() model:disable_adapter(function() error("inside fn") end) end,
             "an error in fn reaches the caller", "inside fn")
check.equal(max_diff(logits(model), trained), 0, "the adapters are back on after an error in fn")
check.raises(function() model:disable_adapter() end, "disable_adapter without fn", "expected a function")

-- save_pretrained / from_pretrained -------------------------------------------
local saved = work .. "/adapter"
local files = model:save_pretrained(saved)
check.equal(table.concat(files, ","), "adapter_model.safetensors,adapter_config.json", "the files PEFT writes")
local tensors = ck.read_safetensors(saved .. "/adapter_model.safetensors")
local file_names = {}
for name in pairs(tensors) do file_names[#file_names + 1] = name end
table.sort(file_names)
check.equal(#file_names, 8, "the adapter file holds the adapters only")
check.equal(file_names[1], "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight",
            "under PEFT's names, without the adapter name")
local written = json.read(saved .. "/adapter_config.json")
check.equal(written.peft_type, "LORA", "adapter_config.json: peft_type")
check.equal(written.r, 2, "adapter_config.json: r")
check.equal(written.lora_alpha, 4, "adapter_config.json: lora_alpha")
check.equal(table.concat(written.target_modules, ","), "q_proj,v_proj", "adapter_config.json: target_modules")
check.equal(written.bias, "none", "adapter_config.json: bias")
check.equal(written.modules_to_save, json.null, "adapter_config.json: modules_to_save null, as PEFT writes None")
check.equal(written.inference_mode, true, "adapter_config.json: inference_mode, as PEFT saves it")
check.equal(written.fan_in_fan_out, false, "adapter_config.json: fan_in_fan_out")
check.truthy(io.open(saved .. "/adapter_config.json"):read("*a"):find('"lora_dropout": 0.0', 1, true) ~= nil,
             "lora_dropout is written as a float, as PEFT reads it")

local loaded = peft.from_pretrained(base(), saved)
check.equal(max_diff(logits(loaded), trained), 0, "from_pretrained gives the saved adapter's outputs")
check.equal(#loaded:parameters(), 0, "from_pretrained freezes the adapters too unless is_trainable, as PEFT")
check.equal(loaded.training, false, "and returns the model in eval mode")
local trainable_loaded = peft.from_pretrained(base(), saved, { is_trainable = true })
check.equal(#trainable_loaded:parameters(), 8, "is_trainable = true loads trainable adapters")
check.equal(select(2, loaded:get_nb_trainable_parameters()), 5936, "frozen adapters still count among all params")

-- merge_and_unload, unload ---------------------------------------------------------
local merged = trainable_loaded:merge_and_unload()
check.equal(merged.__name, "LlamaForCausalLM", "merge_and_unload returns the model")
check.equal(merged.model.layers[1].self_attn.q_proj.__name, "Linear", "with plain layers again")
check.near(max_diff(logits(merged), trained), 0, 1e-5, "merge_and_unload's outputs equal the adapter's")
check.truthy(merged:state_dict()["model.layers.0.self_attn.q_proj.weight"] ~= nil,
             "the merged model has its own names back")
merged:save_pretrained(work .. "/merged")
check.near(max_diff(logits(accel.models.from_pretrained(work .. "/merged")), trained), 0, 1e-5,
           "the merged model saves and loads whole (its frozen weights included)")
local from_folder = peft.get_peft_model(accel.models.from_pretrained(work .. "/merged"), config)
from_folder:save_pretrained(work .. "/named")
check.equal(json.read(work .. "/named/adapter_config.json").base_model_name_or_path, work .. "/merged",
            "base_model_name_or_path: the folder the model was loaded from")
local unloaded = peft.from_pretrained(base(), saved):unload()
check.equal(max_diff(logits(unloaded), before), 0, "unload drops the adapters unmerged")

-- generate goes through the adapters
local prompt = accel.LongTensor({ { 3, 4, 5 } })
local generated = loaded:generate(prompt, { max_new_tokens = 4 })
local reference = accel.models.from_pretrained(work .. "/merged"):generate(prompt, { max_new_tokens = 4 })
check.equal(table.concat(generated[1]:totable(), ","), table.concat(reference[1]:totable(), ","),
            "generate with the adapter equals the merged model's")

-- Matching target_modules ----------------------------------------------------------
local function targeted(spec, cfg)
  local m = peft.get_peft_model(base(cfg), peft.LoraConfig{ target_modules = spec })
  local out = {}
  for name in m:named_parameters() do
    local path = name:match("^base_model%.model%.(.*)%.lora_A%.default%.weight$")
    if path then out[#out + 1] = path end
  end
  return table.concat(out, " ")
end
check.equal(targeted({ "self_attn.q_proj" }), "model.layers.0.self_attn.q_proj model.layers.1.self_attn.q_proj",
            "a name matches the end of the full name at a dot")
check.equal(targeted({ "model.layers.1.mlp.up_proj" }), "model.layers.1.mlp.up_proj", "or the full name")
check.raises(function() targeted({ "_proj" }) end, "a name matches at a dot only", "target_modules {_proj} matches no module")
check.equal(targeted("model\\.layers\\.1\\.self_attn\\.(q|v)_proj"),
            "model.layers.1.self_attn.q_proj model.layers.1.self_attn.v_proj", "a string is a regex on the full name")
check.equal(targeted(".*layers\\.[0-9]+\\.mlp\\.down_proj"),
            "model.layers.0.mlp.down_proj model.layers.1.mlp.down_proj", "classes and quantifiers")
check.raises(function() targeted("q_proj") end, "a regex must match the whole name (re.fullmatch)",
             "target_modules 'q_proj' matches no module", "must match whole")
check.equal(targeted(nil), "model.layers.0.self_attn.q_proj model.layers.0.self_attn.v_proj "
                           .. "model.layers.1.self_attn.q_proj model.layers.1.self_attn.v_proj",
            "no target_modules: PEFT's default for llama, q_proj and v_proj")
local all_linear = targeted("all-linear")
check.truthy(select(2, all_linear:gsub("%S+", "")) == 14 and not all_linear:find("lm_head"),
             "all-linear: the 14 linear layers of the decoder, not lm_head")
local matches = require("accel.peft.targets").pattern
for _, case in ipairs({
  { ".*\\.(q_proj|v_proj)", "a.b.q_proj", true }, { ".*\\.(q_proj|v_proj)", "a.b.k_proj", false },
  { "^layers\\.\\d+\\.fc$", "layers.12.fc", true }, { "layers\\.\\d{2}\\.fc", "layers.1.fc", false },
  { "layers\\.\\d{1,2}\\.fc", "layers.1.fc", true }, { "layers\\.\\d{1,2}\\.fc", "layers.12.fc", true },
  { "layers\\.\\d{1,2}\\.fc", "layers.123.fc", false }, { "\\d{2,}", "123", true }, { "a{,2}", "aaa", false },
  { "a{x}", "a{x}", true }, { "a{,}", "aaa", true }, { "a{}", "a{}", true }, { "(?:a|b)+c", "abbac", true },
  { "[^.]*_proj", "q_proj", true }, { "[^.]*_proj", "x.q_proj", false }, { ".*?proj", "q_proj", true },
  { "(?P<name>q|k)_proj", "k_proj", true }, { "a[b-d]e", "ace", true }, { "a[b-d]e", "aee", false },
  { "x(a*)*y", "xaaay", true }, { "\\w+\\.\\w+", "mlp.up_proj", true }, { "mlp|attn", "attn", true },
}) do
  check.equal(matches(case[1], "test")(case[2]), case[3],
              string.format("regex '%s' on '%s' (re.fullmatch)", case[1], case[2]))
end

-- bias and modules_to_save, on Qwen2's q/k/v biases with tied embeddings
local qwen = { model_type = "qwen2", vocab_size = 32, hidden_size = 16, intermediate_size = 32,
               num_hidden_layers = 2, num_attention_heads = 2, num_key_value_heads = 1,
               tie_word_embeddings = true }
local function trainable_list(cfg)
  local m = peft.get_peft_model(base(qwen), peft.LoraConfig(cfg))
  local out = {}
  for name in m:named_parameters() do
    if not name:find("lora_") then out[#out + 1] = name:gsub("^base_model%.model%.", "") end
  end
  return table.concat(out, " "), m
end
local lora_only = trainable_list({ target_modules = { "q_proj" }, bias = "lora_only" })
check.equal(lora_only, "model.layers.0.self_attn.q_proj.base_layer.bias model.layers.1.self_attn.q_proj.base_layer.bias",
            "bias lora_only: the adapted layers' biases train")
local all_biases, with_all = trainable_list({ target_modules = { "q_proj" }, bias = "all" })
check.equal(select(2, all_biases:gsub("bias", "")), 6, "bias all: every bias trains (q, k, v of 2 layers)")
with_all:save_pretrained(work .. "/bias_all")
local bias_file = ck.read_safetensors(work .. "/bias_all/adapter_model.safetensors")
check.truthy(bias_file["base_model.model.model.layers.1.self_attn.k_proj.bias"] ~= nil
             and bias_file["base_model.model.model.layers.0.self_attn.q_proj.base_layer.bias"] ~= nil,
             "bias all: the biases are saved under their state_dict names, as PEFT saves them")
local tied_base = base(qwen)
check.equal(tied_base.lm_head.weight, tied_base.model.embed_tokens.weight, "the qwen2 case ties its embeddings")
local tied_count = tied_base:num_parameters()
local tied = peft.get_peft_model(tied_base, peft.LoraConfig{ target_modules = { "q_proj" } })
local _, tied_all = tied:get_nb_trainable_parameters()
check.equal(tied_all, tied_count + 2 * (8 * 16 + 16 * 8), "a tied weight counts once")
local tied_inner = tied:get_base_model()
check.truthy(tied_inner.lm_head.weight == tied_inner.model.embed_tokens.weight
             and tied:state_dict()["base_model.model.model.embed_tokens.weight"] ~= nil
             and not tied_inner.lm_head.weight.requires_grad,
             "a tied weight stays tied, frozen, and in the state dict")

local saved_head, with_head = trainable_list({ target_modules = { "q_proj" }, modules_to_save = { "lm_head" } })
check.equal(saved_head, "lm_head.modules_to_save.default.weight", "modules_to_save: a trainable copy, PEFT's name")
local head = with_head.base_model.model.lm_head
check.truthy(head.weight ~= head.original_module.weight and max_diff(head.weight, head.original_module.weight) == 0,
             "the copy starts equal to the original and is its own tensor")
check.equal(head.original_module.weight.requires_grad, false, "the original stays frozen")
accel.no_grad(function() head.weight:add_(1) end)
local with_copy = logits(with_head)
local without = with_head:disable_adapter(function() return logits(with_head) end)
check.truthy(max_diff(with_copy, without) > 0.1 and max_diff(without, logits(base(qwen))) == 0,
             "forward runs the copy, disable_adapter the original")
with_head:save_pretrained(work .. "/saved_head")
check.truthy(ck.read_safetensors(work .. "/saved_head/adapter_model.safetensors")["base_model.model.lm_head.weight"]
             ~= nil, "the copy is saved as base_model.model.lm_head.weight, as PEFT names it")
local head_loaded = peft.from_pretrained(base(qwen), work .. "/saved_head")
check.equal(max_diff(logits(head_loaded), with_copy), 0, "and loads back")
check.near(max_diff(logits(with_head:merge_and_unload()), with_copy), 0, 1e-5,
           "merge_and_unload puts the trained copy in place")

-- bfloat16 base: adapters in float32, as PEFT's autocast_adapter_dtype; the output keeps the base's dtype.
local half = peft.get_peft_model(base():to(accel.bfloat16), peft.LoraConfig{ target_modules = { "q_proj" } })
local half_layer = half.base_model.model.model.layers[1].self_attn.q_proj
check.equal(half_layer.lora_A.default.weight.dtype, "float32", "adapters of a bfloat16 model are float32")
check.equal(half_layer(accel.randn(2, 16):to(accel.bfloat16)).dtype, "bfloat16", "the layer returns bfloat16")

-- Bad configs, models and folders ----------------------------------------------
check.raises(function() peft.LoraConfig{ rank = 8 } end, "an unknown key", "LoraConfig", "unknown option 'rank'")
check.raises(function() peft.LoraConfig{ r = 0 } end, "r = 0", "LoraConfig", "r must be a positive integer")
check.raises(function() peft.LoraConfig{ r = "8" } end, "r of the wrong type", "option 'r' must be a number")
check.raises(function() peft.LoraConfig{ lora_dropout = 1 } end, "dropout 1", "lora_dropout must be in [0, 1)")
check.raises(function() peft.LoraConfig{ bias = "some" } end, "an unknown bias", "bias must be 'none', 'all'")
check.raises(function() peft.LoraConfig{ target_modules = {} } end, "no target modules", "target_modules must be")
check.raises(function() peft.LoraConfig{ target_modules = { "q_proj", 3 } } end, "a number among the names",
             "target_modules[2] must be a module name")
check.raises(function() peft.LoraConfig{ modules_to_save = { k = "lm_head" } } end, "modules_to_save not a list",
             "modules_to_save must be a non-empty list")
check.raises(function() peft.LoraConfig{ init_lora_weights = "pissa" } end, "an initialisation accel lacks",
             "init_lora_weights", "'pissa'")
check.raises(function() peft.LoraConfig{ task_type = "CAUSAL" } end, "an unknown task_type", "task_type must be")
check.raises(function() peft.get_peft_model(base(), { r = 8 }) end, "a plain table as config",
             "accel.peft.LoraConfig{...}")
check.raises(function() peft.get_peft_model("model", config) end, "not a module", "expected a module")
check.raises(function() peft.get_peft_model(base(), peft.LoraConfig{ target_modules = { "qproj" } }) end,
             "targets matching nothing", "target_modules {qproj} matches no module",
             "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, lm_head")
check.raises(function() peft.get_peft_model(base(), peft.LoraConfig{ target_modules = { "mlp" } }) end,
             "a target that is not a Linear", "target_modules matches 'model.layers.0.mlp', a LlamaMLP")
check.raises(function() peft.get_peft_model(base(), peft.LoraConfig{ target_modules = ".*(?=proj)" }) end,
             "a lookahead is matched as Python matches it (no whole name ends before 'proj')",
             "target_modules '.*(?=proj)' matches no module")
check.equal(targeted(".*layers\\.1\\.self_attn\\.q_proj\\b"), "model.layers.1.self_attn.q_proj",
            "a word boundary, as Python's")
check.raises(function() peft.get_peft_model(base(), peft.LoraConfig{ target_modules = ".*(q_proj" }) end,
             "a broken regex", "target_modules", "the pattern '.*(q_proj' does not compile: missing closing parenthesis")
check.raises(function() peft.get_peft_model(base(), peft.LoraConfig{ target_modules = "(.|.)*(y|z)" }) end,
             "a pattern that backtracks exponentially in the name's length", "target_modules",
             "the pattern '(.|.)*(y|z)' failed on", "match limit")
check.raises(function()
  peft.get_peft_model(base(), peft.LoraConfig{ target_modules = { "q_proj" }, modules_to_save = { "head" ,
                                                                                                "score" } })
end, "a modules_to_save name matching nothing", "modules_to_save: 'score' matches no module")
check.raises(function() peft.get_peft_model(nn.Sequential(nn.Linear(2, 2)), peft.LoraConfig{}) end,
             "no target_modules and no model_type", "give target_modules")
check.raises(function()
  peft.get_peft_model(base(), peft.LoraConfig{ target_modules = { "lm_head" }, modules_to_save = { "lm_head" } })
end, "a module of modules_to_save never takes LoRA, as in PEFT", "target_modules {lm_head} matches no module")
check.raises(function() peft.get_peft_model(model, config) end, "adapters twice", "already has adapters")
check.raises(function() peft.get_peft_model(model:get_base_model(), config) end, "adapters twice, inner",
             "already has adapters")
check.raises(function() peft.from_pretrained(base(), work .. "/nowhere") end, "no folder", "is not a folder")

-- A PEFT folder with what accel.peft does not implement, or does not fit.
-- weights: {{name, tensor}, ...} for the adapter file (default: the saved
-- adapter's), or false for none.
local function folder_with(name, edit, weights)
  local dir = work .. "/" .. name
  ck.make_empty_folder(dir)
  local cfg = json.read(saved .. "/adapter_config.json")
  edit(cfg)
  ck.write_text(dir .. "/adapter_config.json", json.encode(cfg))
  if weights == nil then
    weights = {}
    for _, file_name in ipairs(file_names) do weights[#weights + 1] = { file_name, tensors[file_name] } end
  end
  if weights then ck.write_safetensors(dir .. "/adapter_model.safetensors", weights) end
  return dir
end
local function unchanged() end
check.raises(function() peft.from_pretrained(base(), folder_with("dora", function(c) c.use_dora = true end)) end,
             "a DoRA adapter", "dora/adapter_config.json", "'use_dora' is 'true'", "does not implement")
check.raises(function()
  peft.from_pretrained(base(), folder_with("pattern", function(c) c.rank_pattern = { q_proj = 4 } end))
end, "per-layer ranks", "'rank_pattern' is set")
check.raises(function() peft.from_pretrained(base(), folder_with("ia3", function(c) c.peft_type = "IA3" end)) end,
             "another PEFT method", "peft_type 'IA3' is not LORA")
check.raises(function() peft.from_pretrained(base(), folder_with("r0", function(c) c.r = 0 end)) end,
             "a bad value in the file", "r0/adapter_config.json: r must be a positive integer")
local newer = folder_with("newer", function(c) c.option_of_a_later_peft = json.null end)
check.equal(max_diff(logits(peft.from_pretrained(base(), newer)), trained), 0,
            "an option of a later PEFT holding nothing is ignored, as PEFT ignores unknown keys")
check.raises(function() peft.from_pretrained(base(), folder_with("r4", function(c) c.r = 4 end)) end,
             "another rank than the file's, refused before any adapter is made", "r4/adapter_config.json': r is 4",
             "r4/adapter_model.safetensors' holds adapters of rank 2",
             "'base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight' is [2, 16]")
check.raises(function()
  peft.from_pretrained(base(), folder_with("short", unchanged, { { file_names[1], tensors[file_names[1]] } }))
end, "a file lacking tensors", "short/adapter_model.safetensors", "missing",
   "base_model.model.model.layers.0.self_attn.v_proj.lora_A.weight")
check.raises(function()
  peft.from_pretrained(base(), folder_with("k_proj", function(c) c.target_modules = { "q_proj", "k_proj" } end))
end, "tensors for other layers than the file has", "missing", "k_proj.lora_A.weight")
check.raises(function() peft.from_pretrained(base(), folder_with("empty", unchanged, false)) end,
             "no weights file", "has neither adapter_model.safetensors nor adapter_model.bin")
check.raises(function() peft.from_pretrained(base(), work) end, "a folder without adapter_config.json",
             "has no adapter_config.json: not a PEFT adapter folder")
local broken = folder_with("broken", unchanged)
ck.write_text(broken .. "/adapter_config.json", '{"peft_type": "LORA", ')
local broken_error = check.raises(function() peft.from_pretrained(base(), broken) end, "broken JSON",
                                  "broken/adapter_config.json", "not valid JSON")
check.truthy(select(2, broken_error:gsub("test_peft%.lua:%d+:", "")) == 1, "the error names the recipe line once")
ck.write_text(work .. "/a_file", "x")
check.raises(function() model:save_pretrained(work .. "/a_file") end, "saving onto a file",
             "a_file' exists and is not a folder")

-- Gradient checkpointing is the wrapped model's, both ways, as PEFT forwards it.
local checkpointed = peft.get_peft_model(base(), peft.LoraConfig{ r = 2, target_modules = { "q_proj" } })
checkpointed:gradient_checkpointing_enable()
check.equal(checkpointed:get_base_model().is_gradient_checkpointing, true,
            "enabled on the PeftModel: the wrapped model says so")
check.equal(checkpointed.is_gradient_checkpointing, true, "and so does the PeftModel")
checkpointed:get_base_model():gradient_checkpointing_disable()
check.equal(checkpointed.is_gradient_checkpointing, false, "disabled on the wrapped model: the PeftModel says so")

ck.remove_folder(work)
check.done("test_peft")
