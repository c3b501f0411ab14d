-- accel.infer_auto_device_map(model, {max_memory, no_split_module_classes,
-- dtype}): which device each part of the model goes to, as Accelerate's
-- function of the name decides it. Top-level parts are taken in order and
-- placed on the first device (GPUs, then "cpu", then "disk") with room left;
-- a part too big for what is left is split into its children unless it has
-- none or its class is named in no_split_module_classes, in which case the
-- next device is tried. The main device (the first GPU, else the CPU) keeps
-- room for the largest layer, where an offloaded layer's weights are loaded
-- to run it. With clean_result (the default, as in Accelerate) entries under
-- one module that share a device merge into that module's
-- (clean_device_map.lua). Works on models built under accel.init_empty_weights.
-- Tied weights (one tensor in several modules: an lm_head sharing the
-- embedding's weight) go where the part holding the tensor first went, as
-- Accelerate keeps them together: the tensor is counted there once, so the
-- parts that share it cost nothing where it already is.
local args = require("accel.util.args")
local Module = require("accel.nn.module")
local dtypes = require("accel.big_modeling.dtypes")
local module_sizes = require("accel.big_modeling.module_sizes")
local max_memory = require("accel.big_modeling.max_memory")
local device_map_view = require("accel.big_modeling.device_map_view")
local model_parts = require("accel.big_modeling.model_parts")
local placement = require("accel.big_modeling.placement")

local where = "accel.infer_auto_device_map"

return function(model, options)
  if not Module.is_module(model) then args.error(where .. ": expected a module, got a " .. type(model)) end
  local o = args.options(where, options, { max_memory = args.NONE, no_split_module_classes = args.NONE,
                                           dtype = args.NONE, clean_result = true },
                         { clean_result = "boolean" })
  if o.dtype ~= nil then dtypes.check(where, o.dtype) end
  local ok, order_or_err, budget = pcall(max_memory, where, o.max_memory)
  if not ok then args.error(order_or_err) end
  local devices = order_or_err
  local no_split = {}
  if o.no_split_module_classes ~= nil then
    if type(o.no_split_module_classes) ~= "table" then
      args.error(where .. ": no_split_module_classes must be a list of class names, got a "
                 .. type(o.no_split_module_classes))
    end
    for _, name in ipairs(o.no_split_module_classes) do no_split[tostring(name)] = true end
  end

  local sizes = module_sizes.compute(model, o.dtype)
  local queue = model_parts.direct(model, "")
  local main_device = devices[1]
  local reserve = model_parts.largest_layer(queue, sizes, no_split)
  local map, order = {}, {}
  local current, used = 1, 0
  while #queue > 0 do
    local part = queue[1]
    local device = devices[current]
    local room = budget[device] - used - (device == main_device and reserve or 0)
    local size = sizes[part[1]] or 0
    if device == "disk" or size <= room then
      table.remove(queue, 1)
      map[part[1]] = device
      order[#order + 1] = part[1]
      used = used + size
    elseif model_parts.splittable(part, no_split) then
      table.remove(queue, 1)
      for i, child in ipairs(model_parts.direct(part[2], part[1])) do table.insert(queue, i, child) end
    else
      current, used = current + 1, 0
    end
  end
  -- Tied weights: a part holding a tensor an earlier part holds goes to
  -- that part's device.
  local first_device = {}
  for _, e in ipairs(placement.resolve(where, model, map)) do
    local first = first_device[e.tensor]
    if not first then
      first_device[e.tensor] = e.device
    elseif first ~= e.device then
      map[e.unit] = first
    end
  end
  local view = device_map_view.new(map, order, sizes)
  return o.clean_result and device_map_view.cleaned(view) or view
end
