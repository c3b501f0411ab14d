-- Checkpoints of a pipeline (pp_size > 1; parallel/pipeline/): a split
-- checkpoint whose split is by whole tensors over the pp ranks. The ranks
-- of the first data-parallel replica (mesh.dp rank 0; under tensor
-- parallelism its first tp rank, the stages' tp slices gathered over tp
-- first) each write their stages' tensors, under the whole model's names,
-- as model_rank_<r> (one per prepared model), and their optimizers' state
-- keyed by those names, as optimizer_rank_<r>:
--   param_groups.<g>.<hyperparameter>   as the engine's state dict has it
--   state.<parameter name>.<slot>       e.g. state.model.layers.3.mlp.up_proj.weight.exp_avg
-- (a tied weight is written by each of its stages' ranks, alike). The main
-- process's mesh_layout.lua lists the mesh, each writer's rank and the
-- layers its stages hold. The rest (loaders, RNG, schedulers, counters,
-- accumulated gradients) is written as without a pipeline
-- (checkpointing/save.lua).
-- Since every name is whole, a load finds each tensor it needs in whichever
-- writer's file holds it: a pipeline checkpoint loads on any stage cut and
-- on one process (no pipeline), and a pipeline loads a checkpoint of one
-- process (or a FULL_STATE_DICT one of a mesh: model.safetensors whole),
-- whose optimizer's indices are taken as the whole model's parameters()
-- order (the optimizer made on model:parameters(), as usual). Under tensor
-- parallelism each rank keeps its tp slices of the whole tensors read
-- (read_split.fit). On a sharded model without a pipeline (FSDP, TP x
-- FSDP) the whole model's state is loaded as a FULL_STATE_DICT one is,
-- the full parameters in place (checkpointing/load.lua), and its
-- optimizer's state in the layout before sharding, each rank then keeping
-- its shards.
local gathering = require("accel.gathering")
local layout = require("accel.checkpointing.layout")
local field_checks = require("accel.util.field_checks")
local layout_header = require("accel.parallel.checkpoint.layout_header")
local sorted_keys = require("accel.util.sorted_keys")
local tp_slices = require("accel.parallel.checkpoint.tp_slices")
local optimizer_by_name = require("accel.parallel.checkpoint.optimizer_by_name")
local same_tensor = require("accel.util.same_tensor")

local pipeline_checkpoint = {}

-- The parameters of an optimizer in the order of its state's indices.
local function optimizer_params(opt)
  local out = {}
  for g = 1, opt:num_param_groups() do
    for _, p in ipairs(opt:params(g)) do out[#out + 1] = p end
  end
  return out
end

-- {whole name, tensor} of the parameters and buffers of `models`: a
-- pipelined model's under the whole model's names, another's as they are.
local function named_tensors(models)
  local out = {}
  for _, model in ipairs(models) do
    local names = rawget(model, "pipeline") and model.pipeline.names.stage
    for key, t in pairs(model:state_dict()) do out[#out + 1] = { names and names[key] or key, t } end
  end
  return out
end

-- Under FSDP (on each stage, or without a pipeline) the optimizer of a
-- sharded model keeps its state, as checkpoints see it, in the layout it
-- had before sharding (ModelLayout:optimizer_state_dict, a collective):
-- its indices are the parameters it held then, named here through the
-- sharded model's flat layout (a stage's names mapped to the whole
-- model's). Returns {names = index (from 0) -> whole name, group_sizes =
-- {n, ...}} for the optimizer stepping a sharded model's shards, else nil.
local function original_layout(c, opt)
  for _, model in ipairs(c.models) do
    if c.split:sharded(model) and c.split:shard_optimizer(model) == opt.optimizer then
      local flats, names = c.split:flat_layout(model), {}
      local whole = rawget(model, "pipeline") and model.pipeline.names.stage
      for _, flat in ipairs(flats.flats) do
        for _, p in ipairs(flat.params) do
          if p.optimizer_index >= 0 then names[p.optimizer_index] = whole and whole[p.name] or p.name end
        end
      end
      return { names = names, group_sizes = flats.group_sizes }
    end
  end
end

-- Index (from 0) -> the whole name of the parameter of `opt` found by
-- identity among `models`' tensors; nil for one that is none of theirs.
-- With `c`, a sharded model's optimizer's indices before sharding.
local function index_names(opt, models, c)
  local original = c and original_layout(c, opt)
  if original then return original.names end
  local by_shape, names = {}, {}
  for _, entry in ipairs(named_tensors(models)) do
    local shape = table.concat(entry[2]:size(), "x")
    by_shape[shape] = by_shape[shape] or {}
    table.insert(by_shape[shape], entry)
  end
  for k, p in ipairs(optimizer_params(opt)) do
    for _, entry in ipairs(by_shape[table.concat(p:size(), "x")] or {}) do
      if same_tensor(p, entry[2]) then names[k - 1] = entry[1] end
    end
  end
  return names
end

-- Optimizer `opt`'s state keyed by its parameters' whole names; `state`
-- is the state full_states gathered (FSDP), or nil for the optimizer's own.
local function named_optimizer_state(c, opt, j, state)
  return optimizer_by_name.named(state or opt:state_dict(), index_names(opt, c.models, c), j, "a pipeline's checkpoint")
end

-- Whether the Accelerator's models are a pipeline's stages.
function pipeline_checkpoint.applies(c)
  return c.split.pipelined == true
end

-- Saving -----------------------------------------------------------------

-- Whether this rank writes its stages (the first dp replica's first tp rank).
local function writes(c)
  return c.split.mesh.dp.rank == 0 and c.split.mesh.tp.rank == 0
end

-- Gathered on every rank before any writes (collectives): each rank's
-- {rank, pp rank, writes, layers}, under FSDP on each stage the full
-- state of the sharded stages (gathered over dp_shard) and of their
-- optimizers (in the layout before sharding), and under tensor
-- parallelism the stages' and optimizers' full state gathered over tp
-- (after dp_shard), which the writers write.
function pipeline_checkpoint.full_states(c)
  local mine = { rank = c.state.process_index, pp = c.split.mesh.pp.rank, writes = writes(c), layers = {} }
  for i, model in ipairs(c.models) do mine.layers[i] = model:layer_names() end
  local full = { models = {}, optimizers = {}, ranks = gathering.gather_object(c.state._world, mine) }
  c.split:gather_sharded(c.models, c.optimizers, full)
  local tp = c.split:tp()
  if not tp then return full end
  local splits = c.split:mesh_splits(c.models, c.optimizers)
  for i, model in ipairs(c.models) do
    full.models[i] = tp_slices.gather("model", full.models[i] or model:state_dict(), splits.models[i], tp)
  end
  for j, opt in ipairs(c.optimizers) do
    full.optimizers[j] = tp_slices.gather("optimizer", full.optimizers[j] or opt:state_dict(), splits.optimizers[j], tp)
  end
  return full
end

-- This rank's files (a writer's): its stages' tensors and optimizer state
-- by whole names; `full` is what full_states gathered. Returns what
-- save.lua then does not write whole.
function pipeline_checkpoint.rank_files(c, rank, tensors_file, full)
  local written = { models = {}, optimizers = {}, flats = {} }
  for i in ipairs(c.models) do written.models[i] = true end
  for j in ipairs(c.optimizers) do written.optimizers[j] = true end
  if not writes(c) then return written end
  for i, model in ipairs(c.models) do
    local state, names = {}, model.pipeline.names.stage
    for key, t in pairs(full.models[i] or model:state_dict()) do state[names[key]] = t end
    tensors_file(layout.names.model_slices(i, rank), layout.sorted_pairs(state))
  end
  for j, opt in ipairs(c.optimizers) do
    tensors_file(layout.names.optimizer_slices(j, rank),
                 layout.sorted_pairs(named_optimizer_state(c, opt, j, full.optimizers[j])))
  end
  return written
end

-- The main process's mesh_layout.lua.
function pipeline_checkpoint.layout_file(c, lua_file, full)
  local sizes = tp_slices.sizes(c.split.mesh)
  sizes.pp = c.split.mesh.pp.size
  local stages = {}
  for _, r in ipairs(full.ranks) do
    if r.writes then stages[r.pp + 1] = { rank = r.rank, layers = r.layers } end
  end
  -- No tensor is cut within (tp_slices.layout's lists of splits, empty).
  local models, optimizers = {}, {}
  for i in ipairs(c.models) do models[i] = {} end
  for j in ipairs(c.optimizers) do optimizers[j] = {} end
  lua_file(layout.names.mesh, { mesh = sizes, world_size = c.state.num_processes, state_dict_type = "SHARDED_STATE_DICT",
                                models = models, optimizers = optimizers, pipeline = { stages = stages } })
end

-- Loading ----------------------------------------------------------------

local SIZES = { "pp", "dp_replicate", "dp_shard", "cp", "tp" }

local function describe(sizes)
  local parts = {}
  for _, dim in ipairs(SIZES) do parts[#parts + 1] = dim .. " " .. tostring(sizes[dim] or 1) end
  return table.concat(parts, " x ")
end

-- A pipeline's layout read, checked: {mesh, world_size, pipeline = {stages
-- = {[pp rank + 1] = {rank, layers = {[i] = names}}}}}.
local function check_layout(saved, path, c, world_size)
  local where = "'" .. path .. "'"
  layout_header(saved, where, "pipeline", SIZES, world_size)
  local stages = saved.pipeline.stages
  if type(stages) ~= "table" or #stages ~= saved.mesh.pp then
    error(string.format("%s: 'pipeline.stages' must list the %d pp ranks' writers", where, saved.mesh.pp), 0)
  end
  for k, stage in ipairs(stages) do
    local at = string.format("%s (pipeline.stages[%d])", where, k)
    field_checks.check(stage, { { "rank", "count" }, { "layers", "table" } }, at)
    if stage.rank >= world_size then
      error(string.format("%s: 'rank' %d is none of the %d rank(s) saved on", at, stage.rank, world_size), 0)
    end
    if #stage.layers ~= #c.models then
      error(string.format("%s lists the layers of %d model(s) for %d", at, #stage.layers, #c.models), 0)
    end
    for i, names in ipairs(stage.layers) do
      if type(names) ~= "table" or field_checks.list_problem(names) then
        error(string.format("%s: 'layers[%d]' must be a list of layer names", at, i), 0)
      end
    end
  end
  return saved
end

-- The saved model states as sources: model(i) -> {name -> tensor} of the
-- names `wanted` holds (all when nil); optimizer(j) -> its state keyed by
-- whole names (named_optimizer_state's keys). `files` as read_split's.
local function pipeline_sources(saved, files)
  local stages = saved.pipeline.stages
  local function union(name_of, wanted)
    local out = {}
    for _, stage in ipairs(stages) do
      local name = name_of(stage.rank)
      local reader = files.open(name)
      for _, key in ipairs(reader:names()) do
        if out[key] == nil and (wanted == nil or wanted[key]) then out[key] = reader:load(key) end
      end
      reader:close()
    end
    return out
  end
  return {
    model = function(i, wanted) return union(function(r) return layout.names.model_slices(i, r) end, wanted) end,
    optimizer = function(j) return union(function(r) return layout.names.optimizer_slices(j, r) end) end,
    model_file = function(i) return layout.names.model_slices(i, stages[1].rank) end,
    -- The files a model's tensors are looked for in, for errors.
    model_files = function(i)
      local names = {}
      for k, stage in ipairs(stages) do names[k] = layout.names.model_slices(i, stage.rank) end
      return table.concat(names, ", ")
    end,
  }
end

-- A one-process (or FULL_STATE_DICT) checkpoint as sources: its optimizer's
-- indices named by the whole model's parameters() order (`parameters`).
local function whole_sources(files, folder, parameters)
  return {
    model = function(i, wanted)
      local out, reader = {}, files.open(layout.names.model(i))
      for _, key in ipairs(reader:names()) do
        if wanted == nil or wanted[key] then out[key] = reader:load(key) end
      end
      reader:close()
      return out
    end,
    optimizer = function(j)
      return optimizer_by_name.of_one_process(files.tensors(layout.names.optimizer(j)), parameters(j), j,
                                              folder .. "/" .. layout.names.optimizer(j), "a pipeline")
    end,
    model_file = function(i) return layout.names.model(i) end,
    model_files = function(i) return layout.names.model(i) end,
  }
end

-- Optimizer `opt`'s state dict from `named` (its state by whole names):
-- its own groups' parameters, the saved hyperparameters, and the state of
-- each of its parameters found among the models that the checkpoint holds
-- (a sharded model's optimizer's in its layout before sharding, each
-- group's parameters then numbered in order).
local function optimizer_state(c, opt, named, path)
  local original = original_layout(c, opt)
  return optimizer_by_name.indexed(named, index_names(opt, c.models, c), opt.optimizer:state_dict(), path,
                                   original and original.group_sizes)
end

-- This pipelined model's state dict from the whole names' `tensors`, read
-- from `files` (named in errors) of `folder`.
local function stage_state(model, tensors, folder, files)
  local out, missing = {}, {}
  for _, key in ipairs(sorted_keys(model.pipeline.names.stage)) do
    local name = model.pipeline.names.stage[key]
    out[key] = tensors[name]
    if not out[key] then missing[#missing + 1] = name end
  end
  if #missing > 0 then
    error(string.format("'%s' does not fit: missing keys: %s (none of %s holds them)", folder,
                        table.concat(missing, ", "), files), 0)
  end
  return out
end

-- Reads what this rank keeps when the models in force are a pipeline's or
-- the checkpoint is one; returns whether it did (read_split.lua then reads
-- nothing). Fills s.models, s.optimizers, s.model_files, s.same_mesh,
-- s.sliced (a pipeline's state is its own already, but for its tp slices,
-- which read_split.fit cuts) and s.mesh_description.
function pipeline_checkpoint.read(c, s, listed, folder, files)
  local saved, other = nil, "no mesh"
  if listed[layout.names.mesh] then
    local value = files.value(layout.names.mesh)
    if type(value) == "table" and type(value.mesh) == "table" then other = describe(value.mesh) end
    if type(value) == "table" and value.pipeline ~= nil then
      saved = check_layout(value, folder .. "/" .. layout.names.mesh, c, s.manifest.world_size)
    elseif pipeline_checkpoint.applies(c) and not (type(value) == "table" and value.state_dict_type == "FULL_STATE_DICT") then
      error(string.format("'%s' was saved SHARDED_STATE_DICT on a mesh without a pipeline: pp_size > 1 loads a "
                          .. "pipeline's checkpoint, one process's, or a FULL_STATE_DICT one", folder), 0)
    end
  end
  if not saved and not pipeline_checkpoint.applies(c) then return false end
  if pipeline_checkpoint.applies(c) then
    for i in ipairs(c.models) do
      if listed[layout.names.sharding(i)] then
        error(string.format("'%s' holds flat shards (ZeRO / FSDP): pp_size > 1 loads a pipeline's checkpoint, one "
                            .. "process's, or a FULL_STATE_DICT one", folder), 0)
      end
    end
  end
  -- A one-process optimizer's indices: the parameters() order of the whole
  -- model whose stages it steps here.
  local sources = saved and pipeline_sources(saved, files) or whole_sources(files, folder, function(j)
    for _, model in ipairs(c.models) do
      if next(index_names(c.optimizers[j], { model })) ~= nil then return model.pipeline.names.parameters end
    end
    return c.models[1].pipeline.names.parameters
  end)
  for i, model in ipairs(c.models) do
    s.model_files[i] = sources.model_file(i)
    if pipeline_checkpoint.applies(c) then
      local wanted = {}
      for _, name in pairs(model.pipeline.names.stage) do wanted[name] = true end
      s.models[i] = stage_state(model, sources.model(i, wanted), folder, sources.model_files(i))
    else
      -- The whole model's state (a sharded model's loaded with its full
      -- parameters in place, load.lua; tp slices cut by read_split.fit).
      s.models[i] = sources.model(i)
    end
  end
  for j, opt in ipairs(c.optimizers) do
    local name = saved and layout.names.optimizer_slices(j, saved.pipeline.stages[1].rank) or layout.names.optimizer(j)
    s.optimizers[j] = optimizer_state(c, opt, sources.optimizer(j), folder .. "/" .. name)
  end
  local now = nil
  if c.split.mesh then
    now = tp_slices.sizes(c.split.mesh)
    now.pp = c.split.mesh.pp.size
  end
  -- The same mesh, each rank's stages holding the layers they held (else
  -- the accumulated gradients, by this rank's names, are dropped).
  s.same_mesh = false
  local same_cut = saved ~= nil and now ~= nil and pipeline_checkpoint.applies(c)
    and #saved.pipeline.stages == c.split.mesh.pp.size
  if same_cut then
    for k, stage in ipairs(saved.pipeline.stages) do
      for i, model in ipairs(c.models) do
        local names = model.pipeline.layers_by_rank[k] or {}
        if table.concat(stage.layers[i], " ") ~= table.concat(names, " ") then same_cut = false end
      end
    end
  end
  s.same_mesh = same_cut and describe(saved.mesh) == describe(now)
  s.sliced = pipeline_checkpoint.applies(c) and not c.split:tp()
  s.mesh_description = { saved = saved and describe(saved.mesh) or other,
                         now = now and describe(now) or "no mesh" }
  if saved and now and not same_cut and describe(saved.mesh) == describe(now) then
    s.mesh_description.saved = s.mesh_description.saved .. " (another stage cut)"
  end
  return true
end

return pipeline_checkpoint
