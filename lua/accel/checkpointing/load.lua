-- Accelerator:load_state: every file of a checkpoint is read and checked
-- before anything changes, then the Accelerator's objects take the state
-- (checkpointing.lua lists the folder).
local core = require("accel.core")
local serialize = require("accel.util.serialize")
local gathering = require("accel.gathering")
local args = require("accel.util.args")
local read_split = require("accel.parallel.checkpoint.read_split")
local layout = require("accel.checkpointing.layout")
local agreement = require("accel.checkpointing.agreement")
local field_checks = require("accel.util.field_checks")
local DataLoader = require("accel.data.dataloader")
local dtypes = require("accel.big_modeling.dtypes")
local sorted_keys = require("accel.util.sorted_keys")

local ck = core.formats

local load = {}

-- What the value files hold, checked when read (field_checks.lua): a field
-- of the wrong type or range fails the load, naming the file and the
-- field, before anything changes.
local ACCELERATOR_FIELDS = {
  { "micro_step", "count" }, { "sync_steps", "count" }, { "items", "amount" }, { "sync_gradients", "boolean" },
  { "optimizer_updates", "list of counts" }, { "scheduler_seen", "list of counts" }, { "counts", "table" },
}
local COUNT_FIELDS = {
  { "models", "count" }, { "optimizers", "count" }, { "schedulers", "count" }, { "dataloaders", "count" },
  { "custom", "count" },
}
local SCALER_FIELDS = { { "scale", "positive amount" }, { "growth_tracker", "count" } }

-- The newest complete automatic checkpoint, or nil and why there is none.
local function newest_complete(config)
  local all, skipped = layout.numbered_checkpoints(config), {}
  for i = #all, 1, -1 do
    local path = config:checkpoints_dir() .. "/" .. all[i][2]
    local ok, why = ck.complete(path)
    if ok then
      if #skipped > 0 then
        print(string.format("accel: skipping incomplete checkpoints: %s", table.concat(skipped, "; ")))
      end
      return path
    end
    skipped[#skipped + 1] = why
  end
  local message = string.format("Accelerator:load_state: no complete checkpoint in '%s'", config:checkpoints_dir())
  if #skipped > 0 then message = message .. " (" .. table.concat(skipped, "; ") .. ")" end
  return nil, message
end

-- The folder to load, decided by the main process so that every rank loads
-- the same one.
local function load_folder(c, dir)
  if dir ~= nil then
    if type(dir) ~= "string" then args.error("Accelerator:load_state: the folder must be a string, got a " .. type(dir)) end
    return dir
  end
  local config = layout.automatic(c)
  if not config then
    args.error("Accelerator:load_state: give a folder, or make the Accelerator with project_config = "
               .. "accel.ProjectConfiguration{project_dir = ..., automatic_checkpoint_naming = true}")
  end
  local choice = {}
  if c.state.is_main_process then choice[1], choice[2] = newest_complete(config) end
  choice = gathering.gather_object(c.state._world, choice)[1]
  if not choice[1] then args.error(choice[2]) end
  return choice[1]
end

local function check_count(what, saved, now, folder)
  if saved ~= now then
    error(string.format("'%s' holds %d %s but this Accelerator prepared %d", folder, saved, what, now), 0)
  end
end

-- Applies `fn` to a state, naming the file when it refuses it.
function load.apply(path, fn, ...)
  local ok, err = pcall(fn, ...)
  if not ok then error(string.format("'%s' does not fit: %s", path, tostring(err)), 0) end
end

-- A model's tensor read in a dtype of another kind than the model's
-- (integers or booleans where it holds floating point, or the reverse) is
-- refused naming the file and the tensor: copying it in would convert it
-- silently. Floating dtypes load into one another, as in PyTorch.
local function check_dtypes(c, s, folder, listed)
  for i, model in ipairs(c.models) do
    local own, tensors, targets = s.own[i], s.models[i] or {}, nil
    local file = folder .. "/" .. (s.model_files[i] or layout.names.model(i))
    if own then
      tensors, targets = own.tensors, {}
      file = own.file or folder .. "/" .. layout.names.model_slices(i, c.state.process_index)
      for k, shard in ipairs(own.sharded:shards()) do targets["flat_" .. k] = shard end
      for name, b in model:named_buffers() do targets[name] = b end
    else
      targets = model:state_dict()
    end
    for _, name in ipairs(sorted_keys(tensors)) do
      if targets[name] then
        local _, why = dtypes.loaded(tensors[name].dtype, targets[name].dtype)
        if why then error(string.format("'%s': '%s' %s", file, name, why), 0) end
      end
    end
  end
  -- The engine's optimizers keep floating-point state per parameter (a
  -- step count aside).
  local function check_optimizer(state, name)
    for _, key in ipairs(sorted_keys(state)) do
      local slot, t = key:match("^state%.%d+%.(.+)$"), state[key]
      if slot and slot ~= "step" and t:dim() > 0 and not t:is_floating_point() then
        error(string.format("'%s/%s': '%s' is %s, but an optimizer's state of a parameter is floating point",
                            folder, name, key, t.dtype), 0)
      end
    end
  end
  local rank = c.state.process_index
  for j, state in pairs(s.optimizers) do
    local sliced = layout.names.optimizer_slices(j, rank)
    check_optimizer(state, listed[sliced] and sliced or layout.names.optimizer(j))
  end
  for i, own in pairs(s.own) do
    local j = c.split:optimizer_of(c.optimizers, c.models[i])
    check_optimizer(own.optimizer_state, layout.names.optimizer_slices(j, rank))
  end
end

-- Reads and verifies everything this rank needs from `folder`, changing
-- nothing; raises on a missing, truncated or altered file.
local function read_checkpoint(c, folder)
  local manifest = ck.read_manifest(folder)
  ck.check_file_sizes(folder)
  local listed = {}
  for _, f in ipairs(manifest.files) do listed[f.name] = f end
  local function entry(name)
    local f = listed[name]
    if not f then error(string.format("'%s' has no '%s' in its manifest", folder, name), 0) end
    return f
  end
  local function read_tensors(name) return ck.read_safetensors(folder .. "/" .. name, entry(name)) end
  -- A tensor file verified whole against the manifest, its digest computed
  -- reading it through (nothing kept), then opened to be mapped: a rank
  -- reading parts of the files of others (reshard.lua) holds only
  -- what it reads of them.
  local function open_tensors(name)
    local path = folder .. "/" .. name
    ck.verify_file(path, entry(name))
    return ck.open_weights(path)
  end
  local function read_value(name)
    local path = folder .. "/" .. name
    local listed_entry = entry(name)
    if listed_entry.size > layout.MAX_VALUE_BYTES then
      error(string.format("'%s' is listed at %d bytes; a value file holds at most %d", path, listed_entry.size,
                          layout.MAX_VALUE_BYTES), 0)
    end
    return serialize.load(ck.read_text(path, listed_entry), path)
  end

  local s = { manifest = manifest, saved = read_value(layout.names.accelerator) }
  local accelerator_path = "'" .. folder .. "/" .. layout.names.accelerator .. "'"
  field_checks.check(s.saved, ACCELERATOR_FIELDS, accelerator_path)
  field_checks.check(s.saved.counts, COUNT_FIELDS, accelerator_path .. " (counts)")
  local now = layout.counts(c)
  check_count("model(s)", s.saved.counts.models, now.models, folder)
  check_count("optimizer(s)", s.saved.counts.optimizers, now.optimizers, folder)
  check_count("scheduler(s)", s.saved.counts.schedulers, now.schedulers, folder)
  check_count("data loader(s)", s.saved.counts.dataloaders, now.dataloaders, folder)
  check_count("registered object(s)", s.saved.counts.custom, now.custom, folder)
  s.models, s.optimizers, s.schedulers, s.customs, s.loaders = {}, {}, {}, {}, {}
  -- Sharded models saved as each rank's slices: this rank's own files when
  -- the layout is the one it has now, else (without a mesh) the full state
  -- from every rank's, or (under a mesh) this rank's parts of it.
  s.own, s.own_optimizers, s.model_files = {}, {}, {}
  local rank = c.state.process_index
  -- Split models' files (parallel/checkpoint/read_split.lua); the others' whole.
  read_split.read(c, s, listed, folder, { value = read_value, tensors = read_tensors, open = open_tensors })
  for i in ipairs(c.models) do
    if not s.models[i] and not s.own[i] then s.models[i] = read_tensors(layout.names.model(i)) end
  end
  for j = 1, now.optimizers do
    if not s.optimizers[j] and not s.own_optimizers[j] then s.optimizers[j] = read_tensors(layout.names.optimizer(j)) end
  end
  for i = 1, now.schedulers do s.schedulers[i] = read_value(layout.names.scheduler(i)) end
  for i = 1, now.custom do s.customs[i] = read_value(layout.names.custom(i)) end
  s.scaler = c.gradient_state.scaler and read_value(layout.names.scaler)
  if s.scaler then field_checks.check(s.scaler, SCALER_FIELDS, "'" .. folder .. "/" .. layout.names.scaler .. "'") end
  for _, list in ipairs({ { "optimizer_updates", now.optimizers }, { "scheduler_seen", now.schedulers } }) do
    if #s.saved[list[1]] ~= list[2] then
      error(string.format("%s: '%s' has %d entries for %d", accelerator_path, list[1], #s.saved[list[1]], list[2]), 0)
    end
  end
  s.same_world = manifest.world_size == c.state.num_processes
  read_split.fit(c, s, folder)
  check_dtypes(c, s, folder, listed)
  -- On another world size every rank continues from rank 0's position,
  -- which the loader re-shards over the current ranks.
  s.loader_rank = s.same_world and c.state.process_index or 0
  for i = 1, now.dataloaders do
    local name = layout.names.dataloader(i, s.loader_rank)
    s.loaders[i] = field_checks.check(read_value(name), DataLoader.STATE_FIELDS, "'" .. folder .. "/" .. name .. "'")
  end
  s.rng = listed[layout.names.rng(rank)] and read_tensors(layout.names.rng(rank))
  -- Accumulated gradients are this rank's partial sums: they mean nothing
  -- on another world size.
  s.gradients = {}
  if s.same_world and s.same_mesh then
    for i, model in ipairs(c.models) do
      local name = layout.names.gradients(i, rank)
      s.gradients[i] = listed[name] and read_tensors(name)
      local holders = c.split:gradient_holders(model)
      for grad_name in pairs(s.gradients[i] or {}) do
        if not holders[grad_name] then
          error(string.format("'%s/%s' holds an accumulated gradient '%s' that this model does not have: it was "
                              .. "saved at another sharding stage; load it at that stage, or save after an update",
                              folder, name, grad_name), 0)
        end
      end
    end
  end
  return s
end

-- Gives this rank's objects the state `s` read from `folder`.
local function restore(c, folder, s)
  local saved = s.saved
  local function path(name) return folder .. "/" .. name end
  for i, model in ipairs(c.models) do
    local own = s.own[i]
    if own then
      load.apply(own.file or path(layout.names.model_slices(i, c.state.process_index)), read_split.restore_own,
                 own, model)
    else
      c.split:with_full_parameters(model, function()
        load.apply(path(s.model_files[i] or layout.names.model(i)), model.load_state_dict, model, s.models[i])
      end, true)
    end
  end
  for i, opt in ipairs(c.optimizers) do
    -- In its layout before sharding, under ep with this rank's experts (expert_checkpoint.lua).
    if not s.own_optimizers[i] then
      load.apply(path(layout.names.optimizer(i)), opt._load_rank_state_dict, opt, s.optimizers[i])
    end
    opt.updates = saved.optimizer_updates[i]
  end
  for i, sched in ipairs(c.schedulers) do
    load.apply(path(layout.names.scheduler(i)), sched.load_state_dict, sched, s.schedulers[i])
    sched.seen = saved.scheduler_seen[i]
  end
  for i, obj in ipairs(c.custom_objects) do
    load.apply(path(layout.names.custom(i)), obj.load_state_dict, obj, s.customs[i])
  end
  if c.live then c.live:replay(saved.live_changes, folder) end
  c.gradient_state:load_state_dict({ micro_step = saved.micro_step, sync_steps = saved.sync_steps, items = saved.items,
                                     sync_gradients = saved.sync_gradients, scaler = s.scaler })
  for i, model in ipairs(c.models) do
    local grads = s.gradients[i] or {}
    for name, holder in pairs(c.split:gradient_holders(model)) do
      load.apply(path(layout.names.gradients(i, c.state.process_index)), function()
        holder.grad = grads[name] and grads[name]:to(holder.device)   -- read on the CPU
      end)
    end
  end
  for i, loader in ipairs(c.dataloaders) do
    load.apply(path(layout.names.dataloader(i, s.loader_rank)), loader.load_state_dict, loader, s.loaders[i])
  end
  if s.rng then
    ck.set_generator_state(s.rng.generator)
    core.set_math_random_state(s.rng.math_random)
    -- Saved on a GPU and resumed on the CPU (or the reverse): the CPU
    -- generators are restored, the GPU's stays as seeded.
    if s.rng.cuda_generator and c.state.device ~= "cpu" then core.cuda.set_rng_state(s.rng.cuda_generator) end
  end
end

function load.load_state(c, dir)
  local where = "Accelerator:load_state"
  local folder = load_folder(c, dir)
  -- Every rank reads and verifies its share; if any fails, all stop before
  -- changing anything.
  local ok, s = pcall(read_checkpoint, c, folder)
  agreement.agree(c, where, ok and {} or { failure = agreement.reason(s) })
  -- A state that one rank's object refuses (its loader's position, a
  -- registered object) fails every rank too; the objects restored before
  -- that one keep what they were given.
  agreement.agree(c, where, agreement.try(restore, c, folder, s))

  local manifest = s.manifest
  if not s.same_world then
    local world = c.state.num_processes
    local notes = world > manifest.world_size
      and string.format(", ranks from %d on keep their own random state", manifest.world_size) or ""
    if not s.saved.sync_gradients then notes = notes .. ", gradients accumulated before the save are dropped" end
    c.state:print(string.format(
      "accel: '%s' was saved on %d process(es) and is loaded on %d: models, optimizers and schedulers are "
        .. "restored as saved, data loaders continue their epoch re-sharded over %d process(es)%s",
      folder, manifest.world_size, world, world, notes))
  end
  local saved, now = read_split.mesh_change(c, s)
  if saved then
    c.state:print(string.format("accel: '%s' was saved on %s and is loaded on %s: models and optimizers are "
                                .. "split for this mesh%s", folder, saved, now,
                                (s.saved.sync_gradients or not s.same_world) and ""
                                  or ", gradients accumulated before the save are dropped"))
  end
  -- The next automatic save follows the one loaded.
  local config = layout.automatic(c)
  if config and folder == config:checkpoints_dir() .. "/checkpoint_" .. manifest.iteration then
    config.iteration = manifest.iteration + 1
  end
  return folder
end

return load
