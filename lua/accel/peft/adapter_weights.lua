-- The adapter's tensors and their names in PEFT's adapter file
-- (adapter_model.safetensors): a PeftModel state name without the adapter
-- name, as PEFT's get_peft_model_state_dict writes them:
--   base_model.model.<P>.lora_A.default.weight        -> base_model.model.<P>.lora_A.weight
--   base_model.model.<W>.modules_to_save.default.<k>  -> base_model.model.<W>.<k>
--   bias "lora_only": base_model.model.<P>.base_layer.bias, as it is
--   bias "all": every state name ending in "bias", as it is
--   adapter_weights.pairs(peft_model) -> {{state name, file name}, ...} in state order
--   adapter_weights.load(peft_model, path): the file's tensors into the model
local core = require("accel.core")
local args = require("accel.util.args")
local layout = require("accel.checkpointing.layout")
local LoraModel = require("accel.peft.lora_model")
local LoraLayer = require("accel.peft.lora_layer")

local adapter_weights = {}

adapter_weights.FILE = "adapter_model.safetensors"

local FLOATING = { float32 = true, float16 = true, bfloat16 = true, float64 = true }

local function file_name(name, kinds, bias)
  -- The innermost adapter module holding the tensor: cut the name at each dot from the right.
  local dot = #name
  while dot > 0 do
    if name:sub(dot, dot) == "." then
      local path, rest = name:sub(1, dot - 1), name:sub(dot + 1)
      local kind = kinds[path]
      if kind == "lora" then
        local part, tail = rest:match("^(lora_[AB])%.default%.(.+)$")
        if part then return path .. "." .. part .. "." .. tail end
        if bias == "lora_only" and rest == "base_layer.bias" then return name end
        break
      elseif kind == "saved" then
        local tail = rest:match("^modules_to_save%.default%.(.+)$")
        if tail then return path .. "." .. tail end
        break
      end
    end
    dot = dot - 1
  end
  if bias == "all" and (name == "bias" or name:sub(-5) == ".bias") then return name end
end

function adapter_weights.pairs(peft_model)
  local kinds = {}
  for _, a in ipairs(LoraModel.adapters(peft_model)) do
    kinds[a.path] = getmetatable(a.module) == LoraLayer and "lora" or "saved"
  end
  local bias = peft_model.peft_config.bias
  local out = {}
  for _, pair in ipairs(layout.ordered_state(peft_model)) do
    local file = file_name(pair[1], kinds, bias)
    if file then out[#out + 1] = { pair[1], file } end
  end
  return out
end

local function listed(names)
  local shown = table.concat(names, ", ", 1, math.min(#names, 4))
  if #names > 4 then shown = shown .. string.format(" and %d more", #names - 4) end
  return shown
end

-- Refuses, before any adapter is made, a config whose rank `r` the file's
-- LoRA tensors do not have: an adapter_config.json of 495 bytes may ask
-- for r = 5e6, and each adapter would be allocated before the file's
-- shapes were compared. The error names the config's file, `r`, the
-- adapter file and the rank it holds.
function adapter_weights.check_rank(config, path, config_path)
  local source = core.formats.open_weights(path)
  for _, name in ipairs(source:names()) do
    local part = name:match("%.(lora_[AB])%.weight$")
    if part then
      local shape = source:info(name).shape
      local rank = part == "lora_A" and shape[1] or shape[2]
      if rank ~= config.r then
        source:close()
        args.error(string.format("'%s': r is %s, but '%s' holds adapters of rank %s ('%s' is %s)", config_path,
                                 tostring(config.r), path, tostring(rank), name, args.shape(shape)))
      end
    end
  end
  source:close()
end

-- Reads a PEFT adapter file (safetensors, or PEFT's adapter_model.bin) into
-- the model's adapters. The file must hold exactly the adapter's tensors,
-- in their shapes: otherwise nothing is copied and the error names the
-- file and the tensors at fault.
function adapter_weights.load(peft_model, path)
  local wanted = adapter_weights.pairs(peft_model)
  local source = core.formats.open_weights(path)
  local in_file, expected = {}, {}
  for _, name in ipairs(source:names()) do in_file[name] = true end
  local missing, unexpected, mismatched, integral = {}, {}, {}, {}
  local state = peft_model:state_dict()
  for _, pair in ipairs(wanted) do
    local name = pair[2]
    expected[name] = true
    if not in_file[name] then
      missing[#missing + 1] = name
    else
      local info = source:info(name)
      local shape = info.shape
      if not FLOATING[info.dtype] then
        -- copy_ would turn the integers into floats silently.
        integral[#integral + 1] = string.format("'%s' is %s in the file", name, tostring(info.dtype))
      elseif args.shape(shape) ~= args.shape(state[pair[1]]) then
        mismatched[#mismatched + 1] = string.format("'%s' is %s in the file but %s in the model", name,
                                                    args.shape(shape), args.shape(state[pair[1]]))
      end
    end
  end
  for _, name in ipairs(source:names()) do
    if not expected[name] then unexpected[#unexpected + 1] = name end
  end
  table.sort(unexpected)
  local problems = {}
  if #missing > 0 then problems[#problems + 1] = "missing " .. listed(missing) end
  if #unexpected > 0 then problems[#problems + 1] = "unexpected " .. listed(unexpected) end
  if #mismatched > 0 then problems[#problems + 1] = "size mismatch: " .. table.concat(mismatched, "; ") end
  if #integral > 0 then
    problems[#problems + 1] = "not floating point (an adapter's tensors are): " .. table.concat(integral, "; ")
  end
  if #problems > 0 then
    source:close()
    args.error(string.format("%s: the adapter's tensors do not fit the model with its adapter_config.json: %s",
                             path, table.concat(problems, "; ")))
  end
  core.no_grad(function()
    for _, pair in ipairs(wanted) do state[pair[1]]:copy_(source:load(pair[2])) end
  end)
  source:close()
end

return adapter_weights
