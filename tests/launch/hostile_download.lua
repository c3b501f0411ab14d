-- One hostile download (test_hostile_downloads.sh): a model folder, a
-- tokenizer or an adapter as a stranger could publish it, loaded as a recipe
-- loads it. The case is named by the first argument, the work folder by the
-- second; the loader's error is printed on stderr as a recipe's error is
-- (the launcher exits 1), and "loaded" on stdout when the case loads.
--   accel-run hostile_download.lua -- CASE WORK
local core = require("accel.core")
local ck, json = core.formats, core.json

local case, work = arg[1], arg[2]
local fixtures = arg[0]:match("(.*/)") .. "../tokenizers/fixtures"

local function write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
  return path
end
local function read(path)
  local f = assert(io.open(path, "rb"))
  local text = f:read("*a")
  f:close()
  return text
end
local function folder(name)
  local dir = work .. "/" .. name
  ck.make_empty_folder(dir)
  return dir
end
local function fifo(path) assert(os.execute("mkfifo '" .. path .. "'") == 0) end

-- A protobuf length-delimited field: tag, varint length, bytes.
local function varint(n)
  local out = {}
  repeat
    local byte = n % 128
    n = (n - byte) / 128
    out[#out + 1] = string.char(n > 0 and byte + 128 or byte)
  until n == 0
  return table.concat(out)
end
local function field(number, bytes) return varint(number * 8 + 2) .. varint(#bytes) .. bytes end
local function u32(n)
  return string.char(n % 256, math.floor(n / 256) % 256, math.floor(n / 65536) % 256, math.floor(n / 16777216) % 256)
end

-- A tokenizer.json: a one-letter BPE vocabulary with these extra parts.
local function tokenizer_json(dir, extra)
  local vocab = {}
  for i, c in ipairs({ "a", "b", "c", " ", "<unk>", "ab" }) do vocab[c] = i - 1 end
  local t = { version = "1.0", model = { type = "BPE", vocab = vocab, merges = { "a b" }, unk_token = "<unk>" } }
  for k, v in pairs(extra or {}) do t[k] = v end
  return write(dir .. "/tokenizer.json", json.encode(t))
end

local tiny = { model_type = "llama", vocab_size = 32, hidden_size = 16, intermediate_size = 32,
               num_hidden_layers = 2, num_attention_heads = 2, num_key_value_heads = 1 }
local function saved_model(name, cfg)
  local dir = work .. "/" .. name
  accel.set_seed(1)
  accel.models.from_config(cfg or tiny):save_pretrained(dir)
  return dir
end
local function edit_json(path, changes)
  local t = json.read(path)
  for k, v in pairs(changes) do t[k] = v end
  write(path, json.encode(t))
end
local function saved_adapter(name)
  local dir = work .. "/" .. name
  accel.set_seed(1)
  local model = accel.peft.get_peft_model(accel.models.from_config(tiny),
                                          accel.peft.LoraConfig{ r = 2, target_modules = { "q_proj" } })
  model:save_pretrained(dir)
  return dir
end

local cases = {}

-- A tokenizer.model whose normalizer's character map is garbage: a root
-- whose children lie 4 GB past the map. A second normalizer_spec merges
-- into the model's own, its map winning, as protobuf reads it.
cases.charsmap = function()
  local dir = folder("charsmap")
  local trie = u32(0xFFFFFE00) .. u32(0) .. u32(0) .. u32(0)
  local charsmap = u32(#trie) .. trie .. "x\0"
  write(dir .. "/tokenizer.model", read(fixtures .. "/sentencepiece/tokenizer.model") .. field(3, field(2, charsmap)))
  local tok = accel.tokenizers.from_pretrained(dir)
  print("loaded", #tok:encode("hello world"))
end

-- A FIFO in place of each file a download holds.
local function fifo_case(file, load)
  return function()
    local dir = folder("fifo")
    load(dir, file)
    print("loaded")
  end
end
local function tokenizer_folder(dir, file)
  tokenizer_json(dir)
  os.remove(dir .. "/" .. file)
  fifo(dir .. "/" .. file)
  accel.tokenizers.from_pretrained(dir)
end
for _, file in ipairs({ "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json" }) do
  cases["fifo " .. file] = fifo_case(file, tokenizer_folder)
end
cases["fifo tokenizer.model"] = fifo_case("tokenizer.model", function(dir)
  fifo(dir .. "/tokenizer.model")
  accel.tokenizers.from_pretrained(dir)
end)
cases["fifo generation_config.json"] = function()
  local dir = saved_model("fifo-generation")
  os.remove(dir .. "/generation_config.json")
  fifo(dir .. "/generation_config.json")
  accel.models.from_pretrained(dir)
end
for _, file in ipairs({ "adapter_config.json", "adapter_model.safetensors" }) do
  cases["fifo " .. file] = function()
    local dir = saved_adapter("fifo-adapter")
    os.remove(dir .. "/" .. file)
    fifo(dir .. "/" .. file)
    accel.peft.from_pretrained(accel.models.from_config(tiny), dir)
  end
end
local function dataset(path)
  local tok = accel.tokenizers.from_file(tokenizer_json(folder("dataset")))
  tok.pad_token_id = 0  -- padded rows need one; the file is what is refused
  accel.tokenizers.TokenizedDataset(path, tok, { max_length = 8 })
end
cases["fifo data file"] = function()
  local path = work .. "/train.txt"
  fifo(path)
  dataset(path)
end
cases["/dev/zero data file"] = function() dataset("/dev/zero") end
-- A name holding a byte that is not UTF-8, quoted by the refusal.
cases["data file named \\xff"] = function()
  local path = work .. "/bad\255.txt"
  fifo(path)
  dataset(path)
end

-- Normalizers and decoders that double the text, twenty times over.
local function doubling()
  local steps = {}
  for i = 1, 20 do steps[i] = { type = "Replace", pattern = { String = "a" }, content = "aa" } end
  return steps
end
cases["growing normalizers"] = function()
  local tok = accel.tokenizers.from_file(tokenizer_json(folder("grow"), {
    normalizer = { type = "Sequence", normalizers = doubling() } }))
  print("loaded", #tok:encode("aaaaaaaaaaaaaaaaa"))
end
cases["growing decoders"] = function()
  local tok = accel.tokenizers.from_file(tokenizer_json(folder("grow"), {
    decoder = { type = "Sequence", decoders = doubling() } }))
  print("loaded", #tok:decode({ 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }))
end

-- An added token of 100 KB that never matches, over a text of 100 KB that
-- keeps almost matching it: a search of O(text x token) takes minutes.
cases["long added token"] = function()
  local token = ("a "):rep(50000) .. "b"
  local tok = accel.tokenizers.from_file(tokenizer_json(folder("added"), {
    pre_tokenizer = { type = "WhitespaceSplit" },
    added_tokens = { { id = 6, content = token, special = true, normalized = false } },
  }))
  print("loaded", #tok:encode(("a "):rep(50000)))
end

-- A Split pattern that costs just under PCRE2's limit at every byte.
cases["costly split pattern"] = function()
  local tok = accel.tokenizers.from_file(tokenizer_json(folder("split"), {
    pre_tokenizer = { type = "Split", pattern = { Regex = "(?:a|a){18}b|." }, behavior = "Isolated" },
  }))
  print("loaded", #tok:encode(("a"):rep(10000)))
end

-- Configs that ask for far more than their checkpoint holds.
local function layers_case(cfg, key, value)
  return function()
    local dir = saved_model("layers", cfg)
    edit_json(dir .. "/config.json", { [key] = value })
    accel.models.from_pretrained(dir)
    print("loaded")
  end
end
cases["num_hidden_layers"] = layers_case(nil, "num_hidden_layers", 100000)
cases["n_layer"] = layers_case({ model_type = "gpt2", vocab_size = 32, n_embd = 16, n_layer = 2, n_head = 2,
                                 n_positions = 16 }, "n_layer", 100000)
cases["num_local_experts"] = layers_case({ model_type = "mixtral", vocab_size = 32, hidden_size = 16,
                                           intermediate_size = 32, num_hidden_layers = 1, num_attention_heads = 2,
                                           num_key_value_heads = 1, num_local_experts = 2,
                                           num_experts_per_tok = 1 }, "num_local_experts", 100000)

-- An adapter whose config asks for rank 5,000,000.
cases["adapter r"] = function()
  local dir = saved_adapter("rank")
  edit_json(dir .. "/adapter_config.json", { r = 5e6 })
  accel.peft.from_pretrained(accel.models.from_config(tiny), dir)
  print("loaded")
end

-- An adapter whose tensors are int8: refused, not turned into floats.
cases["adapter int8"] = function()
  local dir = saved_adapter("int8")
  local source = ck.open_weights(dir .. "/adapter_model.safetensors")
  local tensors = {}
  for _, name in ipairs(source:names()) do tensors[#tensors + 1] = { name, source:load(name):to("int8") } end
  source:close()
  ck.write_safetensors(dir .. "/adapter_model.safetensors", tensors)
  accel.peft.from_pretrained(accel.models.from_config(tiny), dir)
  print("loaded")
end

-- A target_modules pattern that backtracks exponentially in the name's length.
cases["target_modules regex"] = function()
  local dir = saved_adapter("regex")
  edit_json(dir .. "/adapter_config.json", { target_modules = "(.|.)*(y|z)" })
  accel.peft.from_pretrained(accel.models.from_config(tiny), dir)
  print("loaded")
end

-- generation_config.json values of the wrong type or size.
local function generation_case(changes, call)
  return function()
    local dir = saved_model("generation")
    changes.bos_token_id = 1
    write(dir .. "/generation_config.json", json.encode(changes))
    local model = accel.models.from_pretrained(dir)
    model:generate(accel.LongTensor({ { 1, 2 } }), call)
    print("loaded")
  end
end
cases["do_sample string"] = generation_case({ do_sample = "no" })
cases["temperature string"] = generation_case({ do_sample = true, temperature = "hot" })
cases["max_new_tokens file"] = generation_case({ max_new_tokens = 1e12 })
cases["max_new_tokens call"] = generation_case({}, { max_new_tokens = 1e12 })

local run = cases[case]
if not run then error("no case '" .. tostring(case) .. "'", 0) end
run()
