-- Accelerator:save_state: each rank writes its share of a checkpoint
-- (checkpointing.lua lists the folder) into a temporary folder, the ranks
-- agree it went well, and the main process writes the manifest and renames
-- the folder into place.
local core = require("accel.core")
local serialize = require("accel.util.serialize")
local gathering = require("accel.gathering")
local args = require("accel.util.args")
local write_split = require("accel.parallel.checkpoint.write_split")
local layout = require("accel.checkpointing.layout")
local agreement = require("accel.checkpointing.agreement")

local ck = core.formats

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
  -- Split models' own slices (parallel/checkpoint/write_split.lua).
  local own = write_split.rank_files(c, rank, tensors_file, full)
  if not progress.sync_gradients then
    -- Between micro-steps the gradients summed so far are part of the next update.
    for i, model in ipairs(c.models) do
      local grads = {}
      for name, holder in pairs(c.split:gradient_holders(model)) do grads[name] = holder.grad end
      tensors_file(layout.names.gradients(i, rank), layout.sorted_pairs(grads))
    end
  end
  if not c.state.is_main_process then return entries end

  write_split.mesh_layout(c, lua_file, full)
  for i, model in ipairs(c.models) do
    if not write_split.flat_layout(i, lua_file, own) and not own.models[i] then
      tensors_file(layout.names.model(i), layout.sorted_pairs(full.models[i] or model:state_dict()))
    end
  end
  local updates, seen = {}, {}
  for i, opt in ipairs(c.optimizers) do
    if not own.optimizers[i] then
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
  local full = write_split.full_states(c)
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
