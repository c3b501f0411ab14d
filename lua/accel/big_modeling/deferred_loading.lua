-- A pretrained model built empty whose weights are read later, part by
-- part: what a pipeline's acc:build_model needs so that no rank holds the
-- whole model (parallel/pipeline/stage_loading.lua).
--   local model = deferred_loading.run(function() return accel.models.from_pretrained(dir) end)
--   deferred_loading.checkpoint(model)       -- {path, dtype, source_name}: what from_pretrained would read
--   deferred_loading.fill(model, modules)    -- those modules' tensors read from it; the rest stays on meta
--   deferred_loading.defer(model, fill)      -- a fill left for when the model is split (finish(model) runs it)
-- Under run, fn runs under accel.init_empty_weights and from_pretrained
-- builds the model empty and records its checkpoint here instead of
-- reading it (as transformers' from_pretrained skips the read on the ranks
-- that Accelerate's cpu_ram_efficient_loading builds empty).
--
-- Decisions:
-- - A tensor several modules share (tied embeddings) is read once, by any
--   of its names the checkpoint holds (save_pretrained writes it once,
--   under one of them), and every module sharing it takes the loaded one,
--   those outside `modules` too: it is one tensor.
-- - The checkpoint's tensors are mapped where they lie in the file, as
--   load_checkpoint_and_dispatch maps them: of a safetensors file (or the
--   shards an index names) only the tensors filled are read.
-- - A module split over ranks while empty (tensor_parallel on meta
--   modules) is read as its part of each tensor: `part` names, for a
--   tensor, its whole shape in the checkpoint and how to take this rank's
--   part from the mapped whole, so only that part is copied.
-- - The model's tensors are replaced, not filled in place (LibTorch cannot
--   give a meta tensor memory): an optimizer is made over the parameters
--   after fill.
local args = require("accel.util.args")
local Module = require("accel.nn.module")
local init_empty_weights = require("accel.big_modeling.init_empty_weights")
local placement = require("accel.big_modeling.placement")
local weights_source = require("accel.big_modeling.weights_source")
local dtypes = require("accel.big_modeling.dtypes")

local deferred_loading = {}

local depth = 0
local recorded = setmetatable({}, { __mode = "k" })  -- model -> its checkpoint
local deferred = setmetatable({}, { __mode = "k" })  -- model -> the fill left for when it is split

-- Runs fn under accel.init_empty_weights, from_pretrained deferring its
-- reads (active() is true meanwhile). Returns what fn returns.
function deferred_loading.run(fn)
  depth = depth + 1
  local results = { pcall(init_empty_weights, fn) }
  depth = depth - 1
  if not results[1] then error(results[2], 0) end
  return unpack(results, 2, table.maxn(results))
end

-- Whether from_pretrained, called now, defers its reads.
function deferred_loading.active()
  return depth > 0
end

-- `model` (built empty) is to be filled from `checkpoint`: {path = a
-- checkpoint folder or file, dtype = the dtype floating tensors load as
-- (nil: the model's), source_name = function(name, holds) -> its name in
-- the checkpoint (nil: its own)}.
function deferred_loading.record(model, checkpoint)
  recorded[model] = checkpoint
end

-- The checkpoint recorded for `model`, or nil.
function deferred_loading.checkpoint(model)
  return recorded[model]
end

-- `fill` (a function) is to run once `model`, still empty, has been split
-- (accel.parallel.tensor_parallel calls finish at its end).
function deferred_loading.defer(model, fill)
  deferred[model] = fill
end

-- Runs the fill deferred for `model`, if any, once.
function deferred_loading.finish(model)
  local fill = deferred[model]
  deferred[model] = nil
  if fill then fill() end
end

-- Fills the parameters and buffers of `modules` (a list of modules of
-- `model`, each with its children) from the checkpoint recorded for it,
-- on the CPU; `where` names the caller in errors. `part` (optional):
-- function(entry) -> nil for a tensor read whole, or its whole shape in
-- the checkpoint and a function taking this rank's part of the mapped
-- whole (entry: {name, module, key, tensor}). A tensor the checkpoint
-- lacks or holds with another shape is refused naming both.
function deferred_loading.fill(model, modules, where, part)
  local checkpoint = recorded[model]
  if not checkpoint then args.error(where .. ": no checkpoint was recorded for this model (deferred_loading.run)") end
  local wanted = {}
  for _, m in ipairs(modules) do
    for _, sub in ipairs(m:modules()) do wanted[sub] = true end
  end
  local ok, entries = pcall(placement.resolve, where, model, { [""] = "cpu" })
  if not ok then args.error(entries) end
  local filled, aliases = {}, {}  -- tensor -> true when some wanted module holds it; tensor -> its entries
  for _, e in ipairs(entries) do
    if wanted[e.module] and e.tensor.device == "meta" then filled[e.tensor] = true end
    aliases[e.tensor] = aliases[e.tensor] or {}
    table.insert(aliases[e.tensor], e)
  end
  local path = checkpoint.path
  local opened, src = pcall(weights_source.open, path)
  if not opened then args.error(string.format("%s: %s", where, tostring(src))) end
  local holds = {}
  for _, name in ipairs(src:names()) do holds[name] = true end
  local function saved_name(list)
    for _, e in ipairs(list) do
      local name = checkpoint.source_name and checkpoint.source_name(e.name, holds) or e.name
      if holds[name] then return name end
    end
  end
  local missing = {}
  -- init_empty_weights' guards off: these modules are filled now.
  for m in pairs(wanted) do Module.set_forward_wrapper(m, nil) end
  for _, e in ipairs(entries) do
    if filled[e.tensor] then
      local list = aliases[e.tensor]
      filled[e.tensor] = nil  -- each tensor once, through its first entry
      local name = saved_name(list)
      if not name then
        missing[#missing + 1] = e.name
      else
        local info = src:info(name)
        local whole, take
        if part then whole, take = part(e) end
        whole = whole or e.tensor:size()
        if args.shape(info.shape) ~= args.shape(whole) then
          src:close()
          args.error(string.format("%s: '%s' has shape %s in '%s' but %s in the model%s", where, name,
                                   args.shape(info.shape), path, args.shape(whole),
                                   take and string.format(" (%s here, split)", args.shape(e.tensor:size())) or ""))
        end
        local dtype, why = dtypes.loaded(info.dtype, e.tensor.dtype, checkpoint.dtype)
        if not dtype then
          src:close()
          args.error(string.format("%s: '%s' in '%s' %s", where, name, path, why))
        end
        local t = src:map(name, dtype)
        if take then t = take(t) end
        if not e.is_buffer then t = t:requires_grad_() end
        for _, alias in ipairs(list) do rawset(alias.module, alias.key, t) end
      end
    end
  end
  src:close()
  if #missing > 0 then
    table.sort(missing)
    args.error(string.format("%s: '%s' lacks %s", where, path, table.concat(missing, ", ")))
  end
  return model
end

return deferred_loading
