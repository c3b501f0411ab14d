-- Accelerator:save_state: each rank writes its share of a checkpoint
-- (checkpointing.lua lists the folder) into a temporary folder, the ranks
-- agree it went well, and the main process writes the manifest and renames
-- the folder into place.
local core = require("accel.core")
local serialize = require("accel.serialize")
local gathering = require("accel.gathering")
local args = require("accel.args")
local sharded_state = require("accel.sharding.sharded_state")
local mesh_checkpoint = require("accel.parallel.mesh_checkpoint")
local layout = require("accel.checkpointing.layout")
local agreement = require("accel.checkpointing.agreement")

local ck = core.checkpoint

local save = {}

local function save_folder(c, dir)
  if dir ~= nil then
    if type(dir) ~= "string" then args.error("Accelerator:save_state: the folder must be a string, got a " .. type(dir)) end
    return dir, nil
  end
  local config = layout.automatic(c)
  if not config then
    args.error("Accelerator:save_state: give a folder, or make the Accelerator with project_config = "
               .. "accel.ProjectConfiguration{project_dir = ..., automatic_checkpoint_naming = true}")
  end
  local folder = config:checkpoints_dir() .. "/checkpoint_" .. config.iteration
  if ck.is_folder(folder) then
    args.error(string.format("Accelerator:save_state: '%s' already exists; call acc:load_state() first to "
                             .. "resume from it, or set the ProjectConfiguration's iteration", folder))
  end
  return folder, config
end

-- Removes the oldest automatic checkpoints beyond total_limit.
local function prune(config)
  if not config.total_limit then return end
  local all = layout.numbered_checkpoints(config)
  for i = 1, #all - config.total_limit do
    ck.remove_folder(config:checkpoints_dir() .. "/" .. all[i][2])
  end
end

-- Models whose ranks write their own slices: i -> {model, sharded, j (its
-- optimizer's number), layout}.
local function per_rank_models(c)
  local out = {}
  if not c.sharded_state_dict then return out end
  for i, model in ipairs(c.models) do
    local sharded = c.sharded_models[model]
    if sharded then
      local flats = layout.flat_layout(c, model)
      local j = layout.optimizer_of(c, model)
      flats.optimizer = j
      out[i] = { model = model, sharded = sharded, optimizer = c.shard_layouts[model].optimizer, j = j, layout = flats }
    end
  end
  return out
end

-- Under a mesh: how its tensors are split (out.splits), and with
-- FULL_STATE_DICT every model's and optimizer's full state, gathered over
-- dp_shard (a sharded model's flat parameters; its optimizer's state_dict)
-- then over tp (collectives, on every rank, in the same order).
local function full_mesh_states(c, out)
  out.splits = layout.mesh_splits(c)
  if c.sharded_state_dict then return out end
  for i, model in ipairs(c.models) do
    local own = c.with_full_parameters(model, function()
      local state = {}
      for name, t in pairs(model:state_dict()) do state[name] = t:clone() end
      return state
    end)
    out.models[i] = mesh_checkpoint.gather("model", own, out.splits.models[i], c.mesh.tp)
  end
  for j, opt in ipairs(c.optimizers) do
    out.optimizers[j] = mesh_checkpoint.gather("optimizer", opt:state_dict(), out.splits.optimizers[j], c.mesh.tp)
  end
  return out
end

-- The full state of sharded models and of their optimizers, gathered on
-- every rank (collectives) before any rank writes.
local function full_states(c)
  local out = { models = {}, optimizers = {} }
  if c.mesh then return full_mesh_states(c, out) end
  if c.sharded_state_dict then return out end
  for i, model in ipairs(c.models) do
    if c.sharded_models[model] then
      out.models[i] = c.with_full_parameters(model, function()
        local state = {}
        for name, t in pairs(model:state_dict()) do state[name] = t:clone() end
        return state
      end)
    end
  end
  for i, opt in ipairs(c.optimizers) do
    if opt._sharded and #opt._sharded > 0 then out.optimizers[i] = opt:state_dict() end
  end
  return out
end

-- Writes this rank's share into `tmp`; returns the manifest entries;
-- `full`: what full_states gathered.
local function write_files(c, tmp, full)
  local entries = {}
  local function add(name, format, digest)
    entries[#entries + 1] = { name = name, format = format, size = digest.size, crc32c = digest.crc32c }
  end
  local function lua_file(name, value)
    local bytes = serialize.dump(value)
    if #bytes > layout.MAX_VALUE_BYTES then
      error(string.format("'%s' would be %d bytes; a value file holds at most %d (large tensors belong in a model, "
                          .. "or in a file of your own)", name, #bytes, layout.MAX_VALUE_BYTES), 0)
    end
    add(name, "lua", ck.write_text(tmp .. "/" .. name, bytes))
  end
  local function tensors_file(name, pairs_list)
    add(name, "safetensors", ck.write_safetensors(tmp .. "/" .. name, pairs_list))
  end

  local rank = c.state.process_index
  local generators = { { "generator", ck.generator_state() }, { "math_random", core.math_random_state() } }
  -- A GPU rank's own generator (dropout on the GPU draws from it).
  if c.state.device ~= "cpu" then generators[3] = { "cuda_generator", core.cuda.get_rng_state() } end
  tensors_file(layout.names.rng(rank), generators)
  for i, loader in ipairs(c.dataloaders) do lua_file(layout.names.dataloader(i, rank), loader:state_dict()) end
  local progress = c.gradient_state:state_dict()
  local own = per_rank_models(c)
  local own_optimizers = {}
  for i, m in pairs(own) do
    tensors_file(layout.names.model_slices(i, rank), sharded_state.model_tensors(m.sharded, m.model))
    tensors_file(layout.names.optimizer_slices(m.j, rank), layout.sorted_pairs(m.optimizer:state_dict()))
    own_optimizers[m.j] = true
  end
  -- Under a mesh with SHARDED_STATE_DICT every rank writes its own tp
  -- slices of every model and optimizer not sharded over dp_shard (whose
  -- flat shards it wrote above; the mesh layout says how they split).
  local mesh_slices = c.mesh ~= nil and c.sharded_state_dict
  if mesh_slices then
    for i, model in ipairs(c.models) do
      if not own[i] then tensors_file(layout.names.model_slices(i, rank), layout.sorted_pairs(model:state_dict())) end
    end
    for j, opt in ipairs(c.optimizers) do
      if not own_optimizers[j] then
        tensors_file(layout.names.optimizer_slices(j, rank), layout.sorted_pairs(opt:state_dict()))
        own_optimizers[j] = true
      end
    end
  end
  if not progress.sync_gradients then
    -- Between micro-steps the gradients summed so far are part of the next update.
    for i, model in ipairs(c.models) do
      local grads = {}
      for name, holder in pairs(layout.gradient_holders(c, model)) do grads[name] = holder.grad end
      tensors_file(layout.names.gradients(i, rank), layout.sorted_pairs(grads))
    end
  end
  if not c.state.is_main_process then return entries end

  if c.mesh then
    lua_file(layout.names.mesh, mesh_checkpoint.layout(c.mesh, full.splits, c.state.num_processes,
                                                       c.sharded_state_dict and "SHARDED_STATE_DICT" or "FULL_STATE_DICT"))
  end
  for i, model in ipairs(c.models) do
    if own[i] then
      lua_file(layout.names.sharding(i), own[i].layout)
    elseif not mesh_slices then
      tensors_file(layout.names.model(i), layout.sorted_pairs(full.models[i] or model:state_dict()))
    end
  end
  local updates, seen = {}, {}
  for i, opt in ipairs(c.optimizers) do
    if not own_optimizers[i] then
      tensors_file(layout.names.optimizer(i), layout.sorted_pairs(full.optimizers[i] or opt:state_dict()))
    end
    updates[i] = opt.updates
  end
  for i, sched in ipairs(c.schedulers) do
    lua_file(layout.names.scheduler(i), sched:state_dict())
    seen[i] = sched.seen
  end
  if progress.scaler then lua_file(layout.names.scaler, progress.scaler) end
  for i, obj in ipairs(c.custom_objects) do lua_file(layout.names.custom(i), obj:state_dict()) end
  lua_file(layout.names.accelerator, {
    micro_step = progress.micro_step,
    sync_steps = progress.sync_steps,
    items = progress.items,
    sync_gradients = progress.sync_gradients,
    optimizer_updates = updates,
    scheduler_seen = seen,
    counts = layout.counts(c),
    live_changes = c.live and c.live:record() or nil,
  })
  return entries
end

-- The main process's last part of a save: the manifest, from every rank's
-- entries, then the rename into place.
local function commit(c, tmp, folder, config, reports)
  local files = {}
  for _, report in ipairs(reports) do
    for _, e in ipairs(report.value) do files[#files + 1] = e end
  end
  ck.fault_point("checkpoint-before-manifest")
  ck.write_manifest(tmp, {
    step = c.gradient_state.sync_steps,
    iteration = config and config.iteration or 0,
    world_size = c.state.num_processes,
    files = files,
  })
  ck.fault_point("checkpoint-before-commit")
  ck.commit_folder(tmp, folder)
  return true
end

function save.save_state(c, dir)
  local where = "Accelerator:save_state"
  local folder, config = save_folder(c, dir)
  local tmp = ck.temporary_folder_for(folder)
  local main = c.state.is_main_process
  -- After a failure every rank is done with the temporary folder: the main
  -- process removes it. A failure to remove it is not reported over the
  -- save's own: a temporary folder is never loaded, and the next save of
  -- the same name empties it first.
  local function discard()
    if main then pcall(ck.remove_folder, tmp) end
  end

  -- No rank writes before the temporary folder exists.
  agreement.agree(c, where, main and agreement.try(ck.make_empty_folder, tmp) or {})
  -- Every rank's files are fsynced once it hands its entries over.
  local full = full_states(c)
  local reports = gathering.gather_object(c.state._world, agreement.try(write_files, c, tmp, full))
  agreement.raise_failures(c, where, reports, discard)

  local outcome = {}
  if main then
    outcome = agreement.try(commit, c, tmp, folder, config, reports)
    if outcome.value and config then
      local pruned = agreement.try(prune, config)
      if pruned.failure then
        outcome.failure = string.format("'%s' was saved, but removing the checkpoints beyond total_limit failed: %s",
                                        folder, pruned.failure)
      end
    end
  end
  -- Once the main process has committed, no rank returns before the folder is in place.
  local outcomes = gathering.gather_object(c.state._world, outcome)
  -- A committed folder keeps its name even when pruning failed after: the
  -- next automatic save must not take it again.
  if config and outcomes[1].value then config.iteration = config.iteration + 1 end
  agreement.raise_failures(c, where, outcomes, discard)
  return folder
end

return save
