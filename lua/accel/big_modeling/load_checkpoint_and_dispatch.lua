-- accel.load_checkpoint_and_dispatch(model, path, {device_map, max_memory,
-- offload_folder, no_split_module_classes, dtype, source_name}) -> model, device_map
-- Fills a model (typically built under accel.init_empty_weights) from a
-- checkpoint, tensor by tensor, placing each where the device map says:
-- "cpu" or a GPU get their tensors now; "disk" keeps them on the meta device
-- and loads them around the forward of the module placed there. device_map
-- is a table of dotted names, "auto" (accel.infer_auto_device_map with
-- max_memory, no_split_module_classes and dtype), or absent (all on the CPU).
-- dtype converts floating tensors while loading; without it they take the
-- model's dtype (an integer or boolean tensor keeps its own; one side
-- floating and the other not is refused, naming the tensor and both dtypes).
-- source_name(name, names) maps a model tensor's name to its name in the
-- checkpoint (names: the set the checkpoint holds), for checkpoints named
-- otherwise (accel.models' from_pretrained: with or without the base
-- model's prefix).
local core = require("accel.core")
local ck = core.formats
local args = require("accel.util.args")
local Module = require("accel.nn.module")
local dtypes = require("accel.big_modeling.dtypes")
local weights_source = require("accel.big_modeling.weights_source")
local placement = require("accel.big_modeling.placement")
local disk_offload = require("accel.big_modeling.disk_offload")
local device_alignment = require("accel.big_modeling.device_alignment")
local infer_auto_device_map = require("accel.big_modeling.infer_auto_device_map")
local device_map_view = require("accel.big_modeling.device_map_view")

local where = "accel.load_checkpoint_and_dispatch"

-- Runs fn, raising its error at the recipe's line with this function's name in front.
local function try(fn, ...)
  local ok, result = pcall(fn, ...)
  if not ok then
    result = tostring(result)
    if result:sub(1, #where) ~= where then result = where .. ": " .. result end
    args.error(result)
  end
  return result
end

-- Checks the checkpoint holds every tensor of the model, with its shape,
-- and records the name each is read by (`e.source`) and the dtype it loads
-- as (dtypes.loaded). A tensor several modules share (tied weights) is saved once, under
-- one of its names (save_model writes each tensor once): the others read
-- that one, and must be placed on the same device, not on disk.
-- `source_name(name, holds)` gives the name a model tensor has in the
-- checkpoint (holds: the set of its names); by default, its own.
local function match_checkpoint(src, path, entries, dtype, source_name)
  local holds = {}
  for _, name in ipairs(src:names()) do holds[name] = true end
  local saved_as, placed = {}, {}  -- model tensor -> its name in the checkpoint, the entry placing it first
  for _, e in ipairs(entries) do
    local name = source_name and source_name(e.name, holds) or e.name
    if holds[name] and not saved_as[e.tensor] then saved_as[e.tensor] = name end
    local first = placed[e.tensor]
    if not first then
      placed[e.tensor] = e
    elseif first.device ~= e.device or e.device == "disk" then
      error(string.format("'%s' and '%s' are one tensor (tied weights): place them on one device, not on disk "
                          .. "(they are on %s and %s)", first.name, e.name, tostring(first.device),
                          tostring(e.device)), 0)
    end
  end
  local missing = {}
  for _, e in ipairs(entries) do
    e.source = saved_as[e.tensor]
    if not e.source then
      missing[#missing + 1] = e.name
    else
      local info = src:info(e.source)
      e.shape = e.tensor:size()
      if args.shape(info.shape) ~= args.shape(e.shape) then
        error(string.format("'%s' has shape %s in '%s' but %s in the model",
                            e.name, args.shape(info.shape), path, args.shape(e.shape)), 0)
      end
      local why
      e.dtype, why = dtypes.loaded(info.dtype, e.tensor.dtype, dtype)
      if not e.dtype then error(string.format("'%s' in '%s' %s", e.source, path, why), 0) end
    end
  end
  if #missing > 0 then
    table.sort(missing)
    error(string.format("'%s' lacks %s", path, table.concat(missing, ", ")), 0)
  end
end

-- The module whose forward loads a disk entry: the module the device map
-- placed, all of whose tensors load together (a layer may read its
-- children's weights without calling them, as MultiheadAttention does with
-- out_proj). A container whose forward never runs (ModuleList) hands the
-- entry to its child on the way to the tensor; a tensor placed by its own
-- name loads with the module holding it.
local function loading_module(modules, e)
  local name = e.unit
  local m = modules[name]
  if not m then return e.module end
  while m.forward == Module.forward do
    local rest = name == "" and e.name or e.name:sub(#name + 2)
    local child = rest:match("^([^.]+)%.")
    if not child then break end
    name = name == "" and child or (name .. "." .. child)
    m = modules[name]
  end
  return m
end

-- Disk entries grouped by the module that loads them, in model order, and
-- the model's modules by name.
local function disk_units(model, entries)
  local modules = {}
  for _, pair in ipairs(model:named_modules()) do modules[pair[1]] = pair[2] end
  local units, order = {}, {}
  for _, e in ipairs(entries) do
    if e.device == "disk" then
      local m = loading_module(modules, e)
      if not units[m] then
        units[m] = {}
        order[#order + 1] = m
      end
      table.insert(units[m], e)
    end
  end
  return units, order, modules
end

-- How a disk unit's tensors are read at forward time, onto `device` (the
-- main device): from the offload folder, one safetensors file per unit
-- (written here, already converted), or straight from a safetensors
-- checkpoint.
local function disk_reader(src, o, unit_index, entries, device)
  local function placed(t) return device == "cpu" and t or t:to(device) end
  if o.offload_folder then
    local file = string.format("%s/offloaded_%d.safetensors", o.offload_folder, unit_index)
    local pairs_list = {}
    for i, e in ipairs(entries) do pairs_list[i] = { e.name, src:load(e.source, e.dtype) } end
    ck.write_safetensors(file, pairs_list)
    return function(list)
      local tensors = ck.read_safetensors(file)
      local out = {}
      for i, e in ipairs(list) do out[i] = placed(tensors[e.name]) end
      return out
    end
  end
  return function(list)
    local out = {}
    for i, e in ipairs(list) do out[i] = placed(src:load(e.source, e.dtype)) end
    return out
  end
end

return function(model, path, options)
  if not Module.is_module(model) then args.error(where .. ": expected a module, got a " .. type(model)) end
  if type(path) ~= "string" then args.error(where .. ": the checkpoint path must be a string, got a " .. type(path)) end
  local o = args.options(where, options, { device_map = args.NONE, max_memory = args.NONE, offload_folder = args.NONE,
                                           no_split_module_classes = args.NONE, dtype = args.NONE,
                                           source_name = args.NONE },
                         { device_map = "string|table", offload_folder = "string", source_name = "function" })
  if o.dtype ~= nil then dtypes.check(where, o.dtype) end
  local device_map = o.device_map or { [""] = "cpu" }
  local returned_map = device_map
  if device_map == "auto" then
    -- Placed part by part, as inferred: a part on disk is read around its
    -- own forward, whatever its siblings share. The map returned is
    -- cleaned, as Accelerate's is.
    device_map = infer_auto_device_map(model, { max_memory = o.max_memory, dtype = o.dtype,
                                                no_split_module_classes = o.no_split_module_classes,
                                                clean_result = false })
    returned_map = device_map_view.cleaned(device_map)
  elseif type(device_map) == "string" then
    args.error(string.format("%s: device_map must be \"auto\" or a table of module names, got \"%s\"",
                             where, device_map))
  else
    for _, key in ipairs({ "max_memory", "no_split_module_classes" }) do
      if o[key] ~= nil then args.error(string.format("%s: %s is only used with device_map = \"auto\"", where, key)) end
    end
  end

  local entries = try(placement.resolve, where, model, device_map)
  local src = try(weights_source.open, path)
  try(match_checkpoint, src, path, entries, o.dtype, o.source_name)
  local offloads = false
  for _, e in ipairs(entries) do offloads = offloads or e.device == "disk" end
  if offloads and not o.offload_folder and weights_source.format(path) == "bin" then
    args.error(where .. ": offloading to disk from a pytorch_model.bin needs offload_folder "
               .. "(pickled weights are held whole in memory while read)")
  end
  -- Created when missing, never emptied: it may be a folder of the user's.
  if o.offload_folder and not ck.is_folder(o.offload_folder) then try(ck.make_empty_folder, o.offload_folder) end

  for _, m in ipairs(model:modules()) do Module.set_forward_wrapper(m, nil) end
  local kept_open = false
  try(function()
    local loaded = {}  -- model tensor -> what it became: tied weights stay one tensor
    for _, e in ipairs(entries) do
      if e.device ~= "disk" then
        local t = loaded[e.tensor]
        if not t then
          -- Kept tensors are used where they lie in the file, as Accelerate's
          -- memory-mapped safetensors are: loading reads nothing, the first
          -- forward pages them in (WeightsReader::map).
          t = src:map(e.source, e.dtype)
          if e.device ~= "cpu" then t = t:to(e.device) end
          t = e.is_buffer and t or t:requires_grad_()
          loaded[e.tensor] = t
        end
        rawset(e.module, e.key, t)
      end
    end
    local main = device_alignment.main_device(entries)
    local units, order, modules = disk_units(model, entries)
    for i, unit in ipairs(order) do
      local read = disk_reader(src, o, i, units[unit], main or "cpu")
      disk_offload.empty(units[unit])
      disk_offload.attach(unit, units[unit], read)
      kept_open = kept_open or not o.offload_folder
    end
    if main then device_alignment.attach(model, entries, modules, main) end
  end)
  if not kept_open then src:close() end
  return model, returned_map
end
