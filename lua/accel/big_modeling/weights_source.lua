-- The weights a checkpoint holds, read one tensor at a time:
--   local src = weights_source.open(path)  -- a .safetensors file, a folder
--     -- with model.safetensors.index.json (or model.safetensors), or a
--     -- pytorch_model.bin
--   src:names(); src:info(name) -> {dtype, shape, bytes}
--   src:load(name [, dtype]) -> a CPU tensor of its own; src:close()
-- The engine's lazy reader memory-maps safetensors when it has one
-- (checkpoint.open_weights); otherwise the whole file is read once with the
-- readers save_model's files are loaded with, behind the same interface.
local ck = require("accel.core").checkpoint
local dtypes = require("accel.big_modeling.dtypes")

local weights_source = {}

local Whole = {}
Whole.__index = Whole

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local function read_all(path)
  if ck.is_folder(path) then return ck.load_weights(path) end
  if not exists(path) then error("'" .. path .. "' does not exist", 0) end
  if path:match("%.safetensors$") then return ck.read_safetensors(path) end
  local folder, file = path:match("^(.*)/([^/]+)$")
  if file == "pytorch_model.bin" and not exists(folder .. "/model.safetensors")
     and not exists(folder .. "/model.safetensors.index.json") then
    return ck.load_weights(folder)
  end
  error("'" .. path .. "' is neither a .safetensors file, a folder of weights nor a pytorch_model.bin", 0)
end

local function open_whole(path)
  local tensors = read_all(path)
  local names = {}
  for name in pairs(tensors) do names[#names + 1] = name end
  table.sort(names)
  return setmetatable({ path = path, tensors = tensors, order = names }, Whole)
end

function Whole:names()
  return self.order
end

function Whole:tensor(name)
  local t = self.tensors and self.tensors[name]
  if t == nil then error(string.format("'%s' holds no tensor '%s'", self.path, tostring(name)), 0) end
  return t
end

function Whole:info(name)
  local t = self:tensor(name)
  return { dtype = t.dtype, shape = t:size(), bytes = t:numel() * dtypes.element_size(t.dtype) }
end

function Whole:load(name, dtype)
  local t = self:tensor(name)
  if dtype ~= nil and dtype ~= t.dtype then return t:to(dtype) end
  return t:clone()
end

function Whole:close()
  self.tensors = nil
end

function weights_source.open(path)
  if type(path) ~= "string" then error("the checkpoint path must be a string, got a " .. type(path), 0) end
  if ck.open_weights then return ck.open_weights(path) end
  return open_whole(path)
end

-- "safetensors" or "bin": pickled weights cannot be read lazily, so offloading
-- them to disk needs an offload folder.
function weights_source.format(path)
  if path:match("%.bin$") then return "bin" end
  if ck.is_folder(path) and not exists(path .. "/model.safetensors")
     and not exists(path .. "/model.safetensors.index.json") then
    return "bin"
  end
  return "safetensors"
end

return weights_source
