-- accel.compute_module_sizes(model [, dtype]): bytes of parameters and buffers
-- under every dotted name, as Accelerate's compute_module_sizes: "" is the
-- whole model, "blocks.1" a submodule, "blocks.1.fc.weight" one tensor.
-- With a dtype, floating tensors count at that dtype's size (integer buffers
-- keep theirs), which is what loading with that dtype would keep. Works on
-- models built under accel.init_empty_weights: only shapes are read.
local args = require("accel.util.args")
local dtypes = require("accel.big_modeling.dtypes")

local module_sizes = {}

-- {name, tensor} for parameters then buffers, each in definition order.
function module_sizes.named_tensors(model)
  local out = {}
  for name, p in model:named_parameters() do out[#out + 1] = { name, p } end
  for name, b in model:named_buffers() do out[#out + 1] = { name, b } end
  return out
end

-- The bytes `t` takes once converted to `dtype` (nil: its own).
function module_sizes.tensor_bytes(t, dtype)
  return t:numel() * dtypes.element_size(dtypes.converted(t.dtype, dtype))
end

function module_sizes.compute(model, dtype)
  if type(model) ~= "table" or not model.named_modules then
    args.error("accel.compute_module_sizes: expected a module, got a " .. type(model))
  end
  if dtype ~= nil then dtypes.check("accel.compute_module_sizes", dtype) end
  local sizes = { [""] = 0 }
  for _, pair in ipairs(module_sizes.named_tensors(model)) do
    local bytes = module_sizes.tensor_bytes(pair[2], dtype)
    sizes[""] = sizes[""] + bytes
    local prefix = nil
    for part in pair[1]:gmatch("[^.]+") do
      prefix = prefix and (prefix .. "." .. part) or part
      sizes[prefix] = (sizes[prefix] or 0) + bytes
    end
  end
  return sizes
end

return module_sizes
