-- accel.models: the architectures of Hugging Face checkpoints, as modules
-- whose state_dict names are transformers' own.
--   local model = accel.models.from_pretrained(dir, {dtype, device_map, max_memory, offload_folder,
--                                                    quantization_config})
--   local cfg = accel.models.config(dir)
--   local fresh = accel.models.from_config(cfg_or_dir)   -- initialised as transformers does
--   model:save_pretrained(dir)
-- from_pretrained reads dir/config.json, picks the architecture by
-- model_type, builds it under accel.init_empty_weights and fills it with
-- accel.load_checkpoint_and_dispatch (model.safetensors, shards with
-- model.safetensors.index.json, or pytorch_model.bin; dtype conversion,
-- device maps and offloading come with it). The model is returned in eval
-- mode, as transformers returns it.
local core = require("accel.core")
local args = require("accel.args")
local config = require("accel.models.config")
local init_empty_weights = require("accel.big_modeling.init_empty_weights")
local load_checkpoint_and_dispatch = require("accel.big_modeling.load_checkpoint_and_dispatch")
local dtypes = require("accel.big_modeling.dtypes")
local quantization = require("accel.quantization")

local models = {}

-- model_type -> the module and class that build it, the layers device maps
-- never split (transformers' _no_split_modules), and the base model's
-- prefix (transformers' base_model_prefix): a checkpoint of the bare model
-- ("h.0.attn...", as GPT-2's own files are) loads into the model with a
-- head ("transformer.h.0.attn..."), and one of a model with a head
-- ("bert.encoder...", from BertForMaskedLM) into the bare model.
local architectures = {
  llama = { module = "accel.models.llama", class = "LlamaForCausalLM", no_split = { "LlamaDecoderLayer" },
            prefix = "model" },
  mistral = { module = "accel.models.mistral", class = "MistralForCausalLM", no_split = { "LlamaDecoderLayer" },
              prefix = "model" },
  qwen2 = { module = "accel.models.qwen2", class = "Qwen2ForCausalLM", no_split = { "LlamaDecoderLayer" },
            prefix = "model" },
  mixtral = { module = "accel.models.mixtral", class = "MixtralForCausalLM", no_split = { "LlamaDecoderLayer" },
              prefix = "model" },
  gpt2 = { module = "accel.models.gpt2", class = "GPT2LMHeadModel", no_split = { "GPT2Block" },
           prefix = "transformer" },
  bert = { module = "accel.models.bert", class = "BertModel", no_split = { "BertEmbeddings", "BertLayer" },
           prefix = "bert" },
}

-- The checkpoint's name for a model tensor: its own, or with the base
-- model's prefix taken off or put on, whichever the checkpoint holds.
local function with_or_without(prefix)
  local head = prefix .. "."
  return function(name, holds)
    if holds[name] then return name end
    if name:sub(1, #head) == head and holds[name:sub(#head + 1)] then return name:sub(#head + 1) end
    if holds[head .. name] then return head .. name end
    return name
  end
end

local function architecture(cfg)
  local model_type = cfg.model_type
  local a = architectures[model_type]
  if not a then
    local known = {}
    for k in pairs(architectures) do known[#known + 1] = k end
    table.sort(known)
    args.error(string.format("%s: %s (accel.models knows: %s)", config.source(cfg),
                             model_type == nil and "no 'model_type' key" or
                             string.format("model_type '%s' is not an architecture accel.models has", tostring(model_type)),
                             table.concat(known, ", ")))
  end
  local family = require(a.module)
  config.fill(cfg, family.defaults)
  local cls = family[a.class]
  cls.model_type = model_type
  return cls, a
end

local function is_folder(path)
  return type(path) == "string" and core.checkpoint.is_folder(path)
end

function models.config(dir)
  if not is_folder(dir) then args.error("accel.models.config: '" .. tostring(dir) .. "' is not a folder") end
  return config.read(dir)
end

-- A folder's config, or a table in transformers' keys.
local function config_of(source, where)
  if type(source) == "string" then
    if not is_folder(source) then args.error(where .. ": '" .. source .. "' is not a folder") end
    return config.read(source)
  end
  if type(source) ~= "table" then
    args.error(where .. ": expected a folder or a config table, got a " .. type(source))
  end
  if config.is_config(source) then return source end
  return config.from_table(source, "the config table")
end

-- A model of the config's architecture with fresh weights: N(0,
-- initializer_range^2) as transformers initialises them. {dtype} converts it.
function models.from_config(source, options)
  local where = "accel.models.from_config"
  local o = args.options(where, options, { dtype = args.NONE }, { dtype = "string" })
  local cfg = config_of(source, where)
  local cls = architecture(cfg)
  local model = cls(cfg)
  model:init_weights(config.get(cfg, "initializer_range", "number", 0.02))
  if o.dtype then
    dtypes.check(where, o.dtype)
    model:to(o.dtype)
  end
  return model
end

-- dtype = "auto" loads as config.json's torch_dtype (or dtype) says.
function models.from_pretrained(dir, options)
  local where = "accel.models.from_pretrained"
  local o = args.options(where, options, { dtype = args.NONE, device_map = args.NONE, max_memory = args.NONE,
                                           offload_folder = args.NONE, quantization_config = args.NONE },
                         { dtype = "string", device_map = "string|table", max_memory = "table",
                           offload_folder = "string", quantization_config = "table" })
  if not is_folder(dir) then args.error(where .. ": '" .. tostring(dir) .. "' is not a folder") end
  local cfg = config.read(dir)
  local cls, a = architecture(cfg)
  local dtype = o.dtype
  if dtype == "auto" then dtype = cfg.torch_dtype or cfg.dtype end
  local model = init_empty_weights(function() return cls(cfg) end)
  -- 4-bit (accel.quantization): linears swapped now, filled after the rest.
  local quantized = quantization.prepare(model, cfg, o, where)
  load_checkpoint_and_dispatch(model, dir, {
    dtype = dtype,
    device_map = o.device_map,
    max_memory = o.max_memory,
    offload_folder = o.offload_folder,
    no_split_module_classes = o.device_map == "auto" and a.no_split or nil,
    source_name = with_or_without(a.prefix),
  })
  if quantized then quantized(dir, with_or_without(a.prefix)) end
  local generation_file = dir .. "/generation_config.json"
  local f = io.open(generation_file, "rb")
  if f then
    f:close()
    rawset(model, "generation_config", config.read_file(generation_file))
  end
  return model:eval()
end

-- sentence-transformers' mean pooling of a BERT's last_hidden_state (bert.lua).
models.mean_pooling = require("accel.models.bert").mean_pooling

return models
