-- What from_pretrained does for a 4-bit model (accel.models with
-- quantization_config, or a folder saved with a bitsandbytes 4-bit
-- quantization_config):
--   plan(model, cfg, config) swaps each nn.Linear of the model (built on the
--     meta device) for an empty Linear4bit, but those kept in full precision:
--     the modules named in llm_int8_skip_modules (by default the output
--     layer, lm_head, as transformers), and a weight shared with another
--     module (tied embeddings). A skip name matches a module whose dotted
--     name is it, ends with it or holds it between dots.
--   fill(model, dir, swapped, {...}) then reads each swapped layer's weight
--     from the checkpoint one tensor at a time and quantizes it (or, from a
--     4-bit folder, takes its codes and statistics as they are), so the
--     whole float model is never in memory: the rest of the model is loaded
--     by accel.load_checkpoint_and_dispatch between the two. The allocator's
--     pooled blocks are given back after it.
local core = require("accel.core")
local args = require("accel.util.args")
local Module = require("accel.nn.module")
local Linear = require("accel.nn.linear")
local Linear4bit = require("accel.quantization.linear_4bit")
local BitsAndBytesConfig = require("accel.quantization.bits_and_bytes_config")
local quant_state = require("accel.quantization.quant_state")
local weights_source = require("accel.big_modeling.weights_source")

local loading = {}

local function skipped(path, names)
  local dotted = "." .. path .. "."
  for _, name in ipairs(names) do
    if path == name or dotted:find("." .. name .. ".", 1, true) then return true end
  end
  return false
end

-- Every weight held by more than one module (tied weights).
local function shared_weights(model)
  local holders, shared = {}, {}
  for _, pair in ipairs(model:named_modules()) do
    local w = rawget(pair[2], "weight")
    if type(w) == "userdata" then
      if holders[w] then shared[w] = true end
      holders[w] = true
    end
  end
  return shared
end

-- The config a load uses: a 4-bit folder's own (its config.json's
-- quantization_config), else the one given; nil for neither.
function loading.config(cfg, given, source)
  if cfg.quantization_config ~= nil then return BitsAndBytesConfig.from_dict(cfg.quantization_config, source), true end
  if given == nil then return nil end
  if not BitsAndBytesConfig.is_config(given) then
    args.error(source .. ": quantization_config must be an accel.BitsAndBytesConfig{...}, got a " .. type(given))
  end
  if not given.load_in_4bit then return nil end
  return given, false
end

-- Swaps the model's linears; returns the list of {path, module} swapped.
function loading.plan(model, config)
  local skip = config.llm_int8_skip_modules or { "lm_head" }
  local shared = shared_weights(model)
  local options = { quant_type = config.bnb_4bit_quant_type, double_quant = config.bnb_4bit_use_double_quant,
                    compute_dtype = config.bnb_4bit_compute_dtype, quant_storage = config.bnb_4bit_quant_storage }
  local swapped = {}
  local function walk(m, prefix)
    for _, key in ipairs(m._fields) do
      local child = rawget(m, key)
      if Module.is_module(child) then
        local name = Module.field_name(m, key)
        local path = prefix == "" and name or (prefix .. "." .. name)
        if getmetatable(child) == Linear and not skipped(path, skip) and not shared[child.weight] then
          local q = Linear4bit(child, options)
          rawset(m, key, q)
          swapped[#swapped + 1] = { path = path, module = q }
        else
          walk(child, path)
        end
      end
    end
  end
  walk(model, "")
  return swapped
end

-- Fills the swapped layers from the checkpoint at `dir`. o: source_name
-- (as load_checkpoint_and_dispatch's), dtype (the float weights' before
-- quantizing; nil: the checkpoint's), device, prequantized.
function loading.fill(dir, swapped, o)
  local src = weights_source.open(dir)
  local holds = {}
  for _, name in ipairs(src:names()) do holds[name] = true end
  local ok, err = pcall(function()
    for _, s in ipairs(swapped) do
      local name = o.source_name(s.path .. ".weight", holds)
      local source = string.format("'%s' in '%s'", name, dir)
      if not holds[name] then args.error(string.format("'%s' lacks %s", dir, name)) end
      local layer = s.module
      if o.prequantized then
        local tensors = {}
        for _, field in ipairs(quant_state.tensor_fields) do
          if holds[name .. "." .. field] then tensors[field] = src:load(name .. "." .. field) end
        end
        for _, quant_type in ipairs({ "nf4", "fp4" }) do
          local key = quant_state.packed_key(quant_type)
          if holds[name .. "." .. key] then tensors[key] = src:load(name .. "." .. key) end
        end
        local w = quant_state.unpack(src:load(name), tensors, source)
        if o.device ~= "cpu" then
          for key, value in pairs(w) do
            if type(value) == "userdata" then w[key] = value:to(o.device) end
          end
        end
        layer:set_quantized(w)
      else
        local weight = src:load(name, o.dtype)
        if o.device ~= "cpu" then weight = weight:to(o.device) end
        layer:quantize_(weight)
      end
    end
  end)
  src:close()
  if not ok then error(err, 0) end
  -- Reading and quantizing left the CPU allocator's pools full of the float
  -- weights' blocks (engine/caching_cpu_allocator.h keeps up to 320 MiB), of
  -- sizes a 4-bit model's steps never ask for again: kept, they stayed
  -- resident under every later peak (Llama 3.2 1B's shape: 373 MiB of its
  -- QLoRA training peak, bench/finetune/RESULTS-1b.md).
  core.release_pooled_blocks()
end

return loading
