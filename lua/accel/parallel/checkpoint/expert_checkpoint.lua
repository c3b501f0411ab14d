-- Checkpoints under expert parallelism (ep_size > 1: expert_parallel.lua,
-- expert_sync.lua). A rank holds the other parameters as FSDP or data
-- parallel does, and its share of the experts, named as in the whole model
-- (experts.<global index>...), which the ranks at its place in their ep
-- groups hold too. save_state writes (FULL_STATE_DICT; SHARDED_STATE_DICT
-- under ep is refused, Accelerator:save_state):
--   model.safetensors         main: every tensor but the split experts, full
--                             (gathered over dp_shard x cp under FSDP)
--   optimizer.safetensors     main: the optimizer's hyperparameters and the
--                             state of those parameters, keyed by name
--                             (optimizer_by_name.lua)
--   model_experts_rank_<r>.safetensors, optimizer_experts_rank_<r>.safetensors
--                             the first rank holding each share of the
--                             experts (dp x cp rank < ep_size): its experts'
--                             tensors and state, keyed the same way
--   mesh_layout.lua           main: the mesh (ep too), world_size,
--                             state_dict_type and experts.writers, each ep
--                             rank's writer (a world rank)
-- so every expert's weights and state are written once. The rest (loaders,
-- RNG, schedulers, counters, accumulated gradients: each rank's, its
-- experts' by name) is written as without experts (checkpointing/save.lua).
-- Since every name is the whole model's, a load takes what each rank holds
-- from whichever file holds it: on the same mesh the state as saved (and the
-- accumulated gradients), on another ep size or without ep (one process,
-- data parallel, FSDP) each rank's parameters' tensors and state by name.
-- Under ep a checkpoint of one process (or a FULL_STATE_DICT one of a mesh)
-- loads too, its optimizer's indices taken as the whole model's
-- parameters() order (the optimizer made on model:parameters()). Refused,
-- naming both layouts: under ep, a checkpoint of flat shards, a
-- SHARDED_STATE_DICT or a pipeline's; this one on a pipeline.
local layout = require("accel.checkpointing.layout")
local field_checks = require("accel.util.field_checks")
local layout_header = require("accel.parallel.checkpoint.layout_header")
local expert_parameters = require("accel.parallel.expert_parameters")
local optimizer_by_name = require("accel.parallel.checkpoint.optimizer_by_name")

local expert_checkpoint = {}

-- The mesh sizes a layout lists, outermost first (device_mesh.lua); ep
-- borrows ranks of dp_shard x cp and adds no dim.
local SIZES = { "dp_replicate", "dp_shard", "cp", "tp", "ep" }

local function sizes_of(mesh)
  local sizes = {}
  for _, dim in ipairs(SIZES) do sizes[dim] = mesh[dim].size end
  return sizes
end

-- "dp_replicate 1 x dp_shard 2 x cp 1 x tp 1 x ep 2" (a pipeline's pp first), for messages.
local function describe(sizes)
  local parts = {}
  if (sizes.pp or 1) > 1 then parts[1] = "pp " .. sizes.pp end
  for _, dim in ipairs(SIZES) do parts[#parts + 1] = dim .. " " .. tostring(sizes[dim] or 1) end
  return table.concat(parts, " x ")
end

-- Whether the Accelerator's experts are split over ep.
function expert_checkpoint.applies(c)
  return c.split:ep() ~= nil
end

-- Saving -----------------------------------------------------------------

-- Whether this rank writes its experts: the first of the ranks holding them.
local function writes(c)
  local mesh = c.split.mesh
  return mesh.dp_cp.rank < mesh.ep.size
end

-- Prepared optimizer `opt`'s state (this rank's, in its layout before
-- sharding: a collective under FSDP) keyed by its parameters' names.
local function named_state(c, opt, j)
  return optimizer_by_name.named(opt:_rank_state_dict(), c.split:optimizer_layout(opt, c.models).names, j,
                                 "under ep a checkpoint")
end

-- Gathered on every rank before any writes (collectives, in the same order
-- on every rank): each model's state with its full parameters and this
-- rank's experts, each optimizer's keyed by name.
function expert_checkpoint.full_states(c)
  local out = { models = {}, optimizers = {} }
  for i, model in ipairs(c.models) do out.models[i] = c.split:full_model_state(model) end
  for j, opt in ipairs(c.optimizers) do out.optimizers[j] = named_state(c, opt, j) end
  return out
end

-- `state` cut in two: the split experts' entries and the others'; `name_of`
-- gives the tensor name of a key.
local function split_off_experts(state, is_expert, name_of)
  local experts, others = {}, {}
  for key, t in pairs(state) do
    local name = name_of(key)
    if name and is_expert(name) then experts[key] = t else others[key] = t end
  end
  return experts, others
end

-- This rank's files: the main process's of everything but the experts, a
-- writer's of its experts; `full` is what full_states gathered. Returns
-- what save.lua then does not write whole (all of it).
function expert_checkpoint.rank_files(c, rank, tensors_file, full)
  local written = { models = {}, optimizers = {}, flats = {} }
  local is_expert = expert_parameters.is_expert_name(c.models)
  local main, writer = c.state.is_main_process, writes(c)
  for i in ipairs(c.models) do
    local experts, others = split_off_experts(full.models[i], is_expert, function(key) return key end)
    if main then tensors_file(layout.names.model(i), layout.sorted_pairs(others)) end
    if writer then tensors_file(layout.names.experts(i, rank), layout.sorted_pairs(experts)) end
    written.models[i] = true
  end
  for j in ipairs(c.optimizers) do
    local experts, others = split_off_experts(full.optimizers[j], is_expert, optimizer_by_name.state_key)
    if main then tensors_file(layout.names.optimizer(j), layout.sorted_pairs(others)) end
    if writer then tensors_file(layout.names.optimizer_experts(j, rank), layout.sorted_pairs(experts)) end
    written.optimizers[j] = true
  end
  return written
end

-- The main process's mesh_layout.lua.
function expert_checkpoint.layout_file(c, lua_file)
  local mesh, writers = c.split.mesh, {}
  for k = 1, mesh.ep.size do writers[k] = mesh.dp_cp.ranks[k] end
  lua_file(layout.names.mesh, { mesh = sizes_of(mesh), world_size = c.state.num_processes,
                                state_dict_type = "FULL_STATE_DICT", experts = { writers = writers } })
end

-- Loading ----------------------------------------------------------------

-- An ep checkpoint's layout read, checked: {mesh, world_size,
-- experts = {writers = {[ep rank + 1] = world rank}}}.
local function check_layout(saved, path, world_size)
  local where = "'" .. path .. "'"
  layout_header(saved, where, "experts", SIZES, world_size)
  local product = 1
  for _, dim in ipairs(SIZES) do
    if dim ~= "ep" then product = product * saved.mesh[dim] end
  end
  if product ~= world_size then
    error(string.format("%s: the mesh's sizes (ep aside) multiply to %d but world_size is %d", where, product,
                        world_size), 0)
  end
  if saved.state_dict_type ~= "FULL_STATE_DICT" then
    error(string.format("%s: 'state_dict_type' must be FULL_STATE_DICT under ep, got %s", where,
                        tostring(saved.state_dict_type)), 0)
  end
  local writers = saved.experts.writers
  if type(writers) ~= "table" or field_checks.list_problem(writers) or #writers ~= saved.mesh.ep then
    error(string.format("%s: 'experts.writers' must list the %d ep ranks' writers", where, saved.mesh.ep), 0)
  end
  for k, rank in ipairs(writers) do
    if type(rank) ~= "number" or rank % 1 ~= 0 or rank < 0 or rank >= world_size then
      error(string.format("%s: 'experts.writers[%d]' must be one of the %d rank(s) saved on, got %s", where, k,
                          world_size, tostring(rank)), 0)
    end
  end
  return saved
end

-- The tensors of `names` (files, in order) whose keys `keep` takes, each
-- from the first file holding it; every file is verified whole first
-- (read_split's `files.open`) and only what is kept is read.
local function read_union(files, names, keep)
  local out = {}
  for _, name in ipairs(names) do
    local reader = files.open(name)
    for _, key in ipairs(reader:names()) do
      if out[key] == nil and keep(key) then out[key] = reader:load(key) end
    end
    reader:close()
  end
  return out
end

-- The saved states as sources: model(i, wanted) -> {name -> tensor} of the
-- names `wanted` holds; optimizer(j, wanted) -> the hyperparameters and
-- the state of the parameters `wanted` names, keyed by name; file(kind,
-- i) names the files read, for errors.
local function ep_sources(saved, files)
  local function names_of(main, per_writer)
    local out = { main }
    for _, rank in ipairs(saved.experts.writers) do out[#out + 1] = per_writer(rank) end
    return out
  end
  local function model_files(i) return names_of(layout.names.model(i), function(r) return layout.names.experts(i, r) end) end
  local function optimizer_files(j)
    return names_of(layout.names.optimizer(j), function(r) return layout.names.optimizer_experts(j, r) end)
  end
  return {
    model = function(i, wanted) return read_union(files, model_files(i), function(key) return wanted[key] end) end,
    optimizer = function(j, wanted)
      return read_union(files, optimizer_files(j), function(key)
        local name = optimizer_by_name.state_key(key)
        if name then return wanted[name] end
        return key:match("^param_groups%.") ~= nil
      end)
    end,
    file = function(kind, i) return table.concat(kind == "model" and model_files(i) or optimizer_files(i), ", ") end,
  }
end

-- A checkpoint of one process (or a FULL_STATE_DICT one of a mesh) as
-- sources, under ep: its optimizer's indices named by the whole model's
-- parameters() order (`whole_names(j)`).
local function whole_sources(files, folder, whole_names)
  return {
    model = function(i, wanted)
      return read_union(files, { layout.names.model(i) }, function(key) return wanted[key] end)
    end,
    optimizer = function(j)
      return optimizer_by_name.of_one_process(files.tensors(layout.names.optimizer(j)), whole_names(j), j,
                                              folder .. "/" .. layout.names.optimizer(j), "expert parallelism")
    end,
    file = function(kind, i) return kind == "model" and layout.names.model(i) or layout.names.optimizer(i) end,
  }
end

-- Prepared optimizer `opt`'s state dict, as _load_rank_state_dict takes it
-- (its layout before sharding), from `named` (keyed by name; `path` names
-- the files in errors).
local function indexed_state(c, opt, named, path)
  local own = c.split:optimizer_layout(opt, c.models)
  return optimizer_by_name.indexed(named, own.names, opt.optimizer:state_dict(), path, own.group_sizes)
end

-- The checkpoint's mesh_layout.lua, if any: its value and the sizes it names.
local function saved_layout(listed, files)
  if not listed[layout.names.mesh] then return nil end
  local value = files.value(layout.names.mesh)
  return value, type(value) == "table" and type(value.mesh) == "table" and value.mesh or nil
end

-- What this rank keeps when experts are split over ep now or the
-- checkpoint holds split experts; returns whether it read them
-- (read_split.lua then reads nothing). Fills s.models, s.optimizers,
-- s.model_files, s.same_mesh and s.mesh_description; s.sliced stays unset,
-- so that read_split.fit cuts tp slices from the full states read.
function expert_checkpoint.read(c, s, listed, folder, files)
  local value, saved_sizes = saved_layout(listed, files)
  local is_ep = type(value) == "table" and value.experts ~= nil
  if not is_ep and not expert_checkpoint.applies(c) then return false end
  local mesh = c.split.mesh
  local now = mesh and sizes_of(mesh) or nil
  if now and mesh.pp.size > 1 then now.pp = mesh.pp.size end
  local saved_description = saved_sizes and describe(saved_sizes) or "no mesh"
  local now_description = now and describe(now) or "no mesh"
  local function refuse(what)
    error(string.format("'%s' was saved on %s and this Accelerator runs on %s: %s", folder, saved_description,
                        now_description, what), 0)
  end
  local sources
  if is_ep then
    if mesh and mesh.pp.size > 1 then refuse("a pipeline does not load a checkpoint of experts split over ep yet") end
    sources = ep_sources(check_layout(value, folder .. "/" .. layout.names.mesh, s.manifest.world_size), files)
  else
    local sharded = value ~= nil and (value.pipeline ~= nil or value.state_dict_type ~= "FULL_STATE_DICT")
    for i in ipairs(c.models) do sharded = sharded or listed[layout.names.sharding(i)] ~= nil end
    if sharded then
      refuse("under ep_size > 1 load_state takes a checkpoint saved under ep, one process's, or a FULL_STATE_DICT "
             .. "one (this one holds flat shards, a SHARDED_STATE_DICT or a pipeline's stages)")
    end
    -- The whole model whose parameters the optimizer steps (its first one's).
    sources = whole_sources(files, folder, function(j)
      local first = c.split:optimizer_layout(c.optimizers[j], c.models).names[0]
      for _, model in ipairs(c.models) do
        for name in model:named_parameters() do
          if name == first then return expert_parameters.whole_parameter_names(model) end
        end
      end
      return expert_parameters.whole_parameter_names(c.models[1])
    end)
  end
  for i, model in ipairs(c.models) do
    local wanted = {}
    for name in pairs(model:state_dict()) do wanted[name] = true end
    s.models[i] = sources.model(i, wanted)
    s.model_files[i] = sources.file("model", i)
  end
  for j, opt in ipairs(c.optimizers) do
    local wanted = {}
    for _, name in pairs(c.split:optimizer_layout(opt, c.models).names) do wanted[name] = true end
    s.optimizers[j] = indexed_state(c, opt, sources.optimizer(j, wanted), folder .. "/" .. sources.file("optimizer", j))
  end
  s.same_mesh = is_ep and now ~= nil and saved_sizes ~= nil and describe(saved_sizes) == describe(now)
  s.mesh_description = { saved = saved_description, now = now_description }
  return true
end

return expert_checkpoint
