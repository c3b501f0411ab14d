-- The checkpoint a model loads from, read one tensor at a time by the
-- engine's weights reader (checkpoint.open_weights): of safetensors files
-- only the tensors asked for are read; a pytorch_model.bin
-- is unpickled whole when opened.
--   local src = weights_source.open(path)
--   src:names(); src:info(name) -> {dtype, shape, bytes}
--   src:load(name [, dtype]) -> a CPU tensor of its own; src:close()
--   src:map(name [, dtype]) -> the same over a private mapping of the file
local ck = require("accel.core").formats

local weights_source = {}

-- Found without opening it: a FIFO there would block io.open forever.
local function exists(path)
  return ck.file_kind(path) ~= "missing"
end

function weights_source.open(path)
  if type(path) ~= "string" then error("the checkpoint path must be a string, got a " .. type(path), 0) end
  return ck.open_weights(path)
end

-- "safetensors" or "bin": pickled weights are held whole in memory while
-- open, so offloading them to disk needs an offload folder.
function weights_source.format(path)
  if path:match("%.bin$") then return "bin" end
  if ck.is_folder(path) and not exists(path .. "/model.safetensors")
     and not exists(path .. "/model.safetensors.index.json") then
    return "bin"
  end
  return "safetensors"
end

return weights_source
