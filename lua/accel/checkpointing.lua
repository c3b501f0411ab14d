-- What an Accelerator's checkpoint holds and how ranks write and read it
-- together; the file formats and the atomic folder are the engine's
-- (engine/checkpoint/, bound as accel.core.checkpoint). The contract is in
-- docs/api/checkpointing.md. A checkpoint folder:
--
--   model.safetensors, model_1.safetensors ...  prepared models (main process)
--   optimizer.safetensors, optimizer_1 ...      optimizers' flat state dicts (main)
--   scheduler.lua, scheduler_1.lua ...          schedulers' state dicts (main)
--   scaler.lua                                  the fp16 loss scaler (main)
--   custom_checkpoint_0.lua ...                 registered objects (main)
--   accelerator_state.lua                       step counters (main)
--   rng_<rank>.safetensors                      each rank's generators
--   dataloader_rank_<rank>.lua, dataloader_1_rank_<rank>.lua ...
--                                               each rank's loader positions
--   model_rank_<rank>.safetensors, model_1_rank_<rank> ...
--                                               a sharded model's slices, each rank's
--                                               (SHARDED_STATE_DICT, sharding/sharded_state.lua)
--   optimizer_rank_<rank>.safetensors ...       its optimizer's sharded state, each rank's
--   model_sharding.lua, model_1_sharding.lua    their layout (main)
--   gradients_rank_<rank>.safetensors, gradients_1_rank_<rank> ...
--                                               each rank's accumulated gradients,
--                                               when saved between two micro-steps
--                                               of one optimizer update
--   manifest.json                               written last (engine/checkpoint/manifest.h)
--
-- ".lua" files hold one Lua value written by accel.serialize (data only: no
-- Lua code is loaded from them, see accel/serialize.lua).
--
-- Saving and loading take the checkpoint's contents as explicit lists, `c`
-- below (Accelerator:_checkpoint_contents makes it):
--   c.state: the PartialState (process facts, collectives, print)
--   c.project_configuration: where automatic checkpoints go
--   c.gradient_state: step counters, sync_gradients and the fp16 scaler
--   c.models, c.optimizers, c.schedulers, c.dataloaders, c.custom_objects:
--     the prepared and registered objects, in preparation order
--   c.sharded_models: model -> its ShardedModel (ZeRO / FSDP); their state
--     and their optimizers' are written full, as plain data parallel writes
--     them (FULL_STATE_DICT), so any stage and world size loads them, or
--     with c.sharded_state_dict each rank's slices (SHARDED_STATE_DICT);
--     c.shard_layouts: model -> {optimizer = the engine optimizer stepping
--     its shards, param_names = each unit's parameter names}
--   c.with_full_parameters(model, fn, written): runs fn with the model's
--     full parameters in place (a collective when sharded)
local core = require("accel.core")
local serialize = require("accel.serialize")
local gathering = require("accel.gathering")
local guard = require("accel.collective_guard")
local args = require("accel.args")
local sharded_state = require("accel.sharding.sharded_state")

local ck = core.checkpoint

local checkpointing = {}

-- base, base_1, base_2 ... for the first, second, third object of a kind.
local function indexed(base, i)
  return i == 1 and base or (base .. "_" .. (i - 1))
end

local names = {
  model = function(i) return indexed("model", i) .. ".safetensors" end,
  optimizer = function(i) return indexed("optimizer", i) .. ".safetensors" end,
  scheduler = function(i) return indexed("scheduler", i) .. ".lua" end,
  custom = function(i) return "custom_checkpoint_" .. (i - 1) .. ".lua" end,
  rng = function(rank) return "rng_" .. rank .. ".safetensors" end,
  dataloader = function(i, rank) return indexed("dataloader", i) .. "_rank_" .. rank .. ".lua" end,
  gradients = function(i, rank) return indexed("gradients", i) .. "_rank_" .. rank .. ".safetensors" end,
  model_slices = function(i, rank) return indexed("model", i) .. "_rank_" .. rank .. ".safetensors" end,
  optimizer_slices = function(j, rank) return indexed("optimizer", j) .. "_rank_" .. rank .. ".safetensors" end,
  sharding = function(i) return indexed("model", i) .. "_sharding.lua" end,
  scaler = "scaler.lua",
  accelerator = "accelerator_state.lua",
}

local function sorted_pairs(map)
  local keys = {}
  for k in pairs(map) do keys[#keys + 1] = k end
  table.sort(keys)
  local out = {}
  for i, k in ipairs(keys) do out[i] = { k, map[k] } end
  return out
end

-- Parameters then buffers, each in definition order, as save_model writes them.
local function ordered_state(model)
  local out = {}
  for name, p in model:named_parameters() do out[#out + 1] = { name, p } end
  for name, b in model:named_buffers() do out[#out + 1] = { name, b } end
  return out
end

local function counts(c)
  return {
    models = #c.models,
    optimizers = #c.optimizers,
    schedulers = #c.schedulers,
    dataloaders = #c.dataloaders,
    custom = #c.custom_objects,
  }
end

local function automatic(c)
  local config = c.project_configuration
  return config and config.automatic_checkpoint_naming and config or nil
end

-- {number, name} of every project_dir/checkpoints/checkpoint_<n>, oldest first.
local function numbered_checkpoints(config)
  local out = {}
  for _, name in ipairs(ck.list_folder(config:checkpoints_dir())) do
    local n = name:match("^checkpoint_(%d+)$")
    if n then out[#out + 1] = { tonumber(n), name } end
  end
  table.sort(out, function(a, b) return a[1] < b[1] end)
  return out
end

-- Ranks agreeing -------------------------------------------------------------
--
-- Each rank does its own part of a save or a load (its files, its loaders)
-- under pcall, then the ranks exchange how it went, and when any failed
-- every rank raises the same error. A rank failing alone would otherwise
-- leave the others in the save's next collective, waiting out --timeout or
-- pairing it with whatever collective the failing rank's recipe calls next.
-- The error is raised together (collective_guard.lua), so a recipe may catch
-- it with pcall and go on: every rank stands at the same point.

-- A caught error's message without the "file.lua:12: " that error() put in front.
local function reason(err)
  return (tostring(err):gsub("^[^\n]-%.lua:%d+: ", ""))
end

-- What this rank tells the others about fn(...): {value = its result}, or
-- {failure = why} when it raised.
local function try(fn, ...)
  local ok, result = pcall(fn, ...)
  if ok then return { value = result } end
  return { failure = reason(result) }
end

local function rank_list(ranks)
  return (#ranks == 1 and "rank " or "ranks ") .. table.concat(ranks, ", ")
end

-- When any of `reports` (every rank's, in rank order) failed, runs `undo`
-- (if given) and raises on every rank one message naming each failing rank
-- and its reason; ranks that failed alike share one entry ("ranks 0, 1: ...").
local function raise_failures(c, where, reports, undo)
  local reasons, ranks_of = {}, {}
  for r, report in ipairs(reports) do
    local why = report.failure
    if why then
      if not ranks_of[why] then
        reasons[#reasons + 1] = why
        ranks_of[why] = {}
      end
      table.insert(ranks_of[why], r - 1)
    end
  end
  if #reasons == 0 then return end
  if undo then undo() end
  for i, why in ipairs(reasons) do
    if c.state.num_processes > 1 then reasons[i] = rank_list(ranks_of[why]) .. ": " .. why end
  end
  guard.raise_together(where .. ": " .. table.concat(reasons, "; "))
end

-- Gathers every rank's report and raises if any failed; returns the reports.
local function agree(c, where, mine)
  local reports = gathering.gather_object(c.state._world, mine)
  raise_failures(c, where, reports)
  return reports
end

-- Saving ---------------------------------------------------------------------

local function save_folder(c, dir)
  if dir ~= nil then
    if type(dir) ~= "string" then args.error("Accelerator:save_state: the folder must be a string, got a " .. type(dir)) end
    return dir, nil
  end
  local config = automatic(c)
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
  local all = numbered_checkpoints(config)
  for i = 1, #all - config.total_limit do
    ck.remove_folder(config:checkpoints_dir() .. "/" .. all[i][2])
  end
end

-- name -> tensor whose .grad holds this rank's accumulated gradient: the
-- model's parameters, or at stages 2 and 3 this rank's slices of the flat
-- buffers ("flat_<k>"), into which every backward reduces (already summed
-- over the ranks); the parameters themselves have none there.
local function gradient_holders(c, model)
  local holders = {}
  local sharded = c.sharded_models[model]
  if sharded and sharded:holds_gradient_slices() then
    for k, shard in ipairs(sharded:shards()) do holders["flat_" .. k] = shard end
  else
    for name, p in model:named_parameters() do holders[name] = p end
  end
  return holders
end

-- The number, among c.optimizers, of the optimizer stepping `model`'s shards.
local function optimizer_of(c, model)
  local engine = c.shard_layouts[model].optimizer
  for j, opt in ipairs(c.optimizers) do
    if opt.optimizer == engine then return j end
  end
  error("the optimizer of a sharded model was not prepared with it", 0)
end

-- Models whose ranks write their own slices: i -> {model, sharded, j (its
-- optimizer's number), layout}.
local function per_rank_models(c)
  local out = {}
  if not c.sharded_state_dict then return out end
  for i, model in ipairs(c.models) do
    local sharded = c.sharded_models[model]
    if sharded then
      local info = c.shard_layouts[model]
      local layout = sharded_state.layout(sharded, info.optimizer, info.param_names, c.state.num_processes)
      local j = optimizer_of(c, model)
      layout.optimizer = j
      out[i] = { model = model, sharded = sharded, optimizer = info.optimizer, j = j, layout = layout }
    end
  end
  return out
end

-- The full state of sharded models and of their optimizers, gathered on
-- every rank (collectives) before any rank writes.
local function full_states(c)
  local out = { models = {}, optimizers = {} }
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
    add(name, "lua", ck.write_text(tmp .. "/" .. name, serialize.dump(value)))
  end
  local function tensors_file(name, pairs_list)
    add(name, "safetensors", ck.write_safetensors(tmp .. "/" .. name, pairs_list))
  end

  local rank = c.state.process_index
  local generators = { { "generator", ck.generator_state() }, { "math_random", core.math_random_state() } }
  -- A GPU rank's own generator (dropout on the GPU draws from it).
  if c.state.device ~= "cpu" then generators[3] = { "cuda_generator", core.cuda.get_rng_state() } end
  tensors_file(names.rng(rank), generators)
  for i, loader in ipairs(c.dataloaders) do lua_file(names.dataloader(i, rank), loader:state_dict()) end
  local progress = c.gradient_state:state_dict()
  local own = per_rank_models(c)
  local own_optimizers = {}
  for i, m in pairs(own) do
    tensors_file(names.model_slices(i, rank), sharded_state.model_tensors(m.sharded, m.model))
    tensors_file(names.optimizer_slices(m.j, rank), sorted_pairs(m.optimizer:state_dict()))
    own_optimizers[m.j] = true
  end
  if not progress.sync_gradients then
    -- Between micro-steps the gradients summed so far are part of the next update.
    for i, model in ipairs(c.models) do
      local grads = {}
      for name, holder in pairs(gradient_holders(c, model)) do grads[name] = holder.grad end
      tensors_file(names.gradients(i, rank), sorted_pairs(grads))
    end
  end
  if not c.state.is_main_process then return entries end

  for i, model in ipairs(c.models) do
    if own[i] then
      lua_file(names.sharding(i), own[i].layout)
    else
      tensors_file(names.model(i), sorted_pairs(full.models[i] or model:state_dict()))
    end
  end
  local updates, seen = {}, {}
  for i, opt in ipairs(c.optimizers) do
    if not own_optimizers[i] then
      tensors_file(names.optimizer(i), sorted_pairs(full.optimizers[i] or opt:state_dict()))
    end
    updates[i] = opt.updates
  end
  for i, sched in ipairs(c.schedulers) do
    lua_file(names.scheduler(i), sched:state_dict())
    seen[i] = sched.seen
  end
  if progress.scaler then lua_file(names.scaler, progress.scaler) end
  for i, obj in ipairs(c.custom_objects) do lua_file(names.custom(i), obj:state_dict()) end
  lua_file(names.accelerator, {
    micro_step = progress.micro_step,
    sync_steps = progress.sync_steps,
    items = progress.items,
    sync_gradients = progress.sync_gradients,
    optimizer_updates = updates,
    scheduler_seen = seen,
    counts = counts(c),
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

function checkpointing.save_state(c, dir)
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
  agree(c, where, main and try(ck.make_empty_folder, tmp) or {})
  -- Every rank's files are fsynced once it hands its entries over.
  local full = full_states(c)
  local reports = gathering.gather_object(c.state._world, try(write_files, c, tmp, full))
  raise_failures(c, where, reports, discard)

  local outcome = {}
  if main then
    outcome = try(commit, c, tmp, folder, config, reports)
    if outcome.value and config then
      local pruned = try(prune, config)
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
  raise_failures(c, where, outcomes, discard)
  return folder
end

-- Loading --------------------------------------------------------------------

-- The newest complete automatic checkpoint, or nil and why there is none.
local function newest_complete(config)
  local all, skipped = numbered_checkpoints(config), {}
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
  local config = automatic(c)
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
local function apply(path, fn, ...)
  local ok, err = pcall(fn, ...)
  if not ok then error(string.format("'%s' does not fit: %s", path, tostring(err)), 0) end
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
  local function read_value(name)
    local path = folder .. "/" .. name
    return serialize.load(ck.read_text(path, entry(name)), path)
  end

  local s = { manifest = manifest, saved = read_value(names.accelerator) }
  local now = counts(c)
  check_count("model(s)", s.saved.counts.models, now.models, folder)
  check_count("optimizer(s)", s.saved.counts.optimizers, now.optimizers, folder)
  check_count("scheduler(s)", s.saved.counts.schedulers, now.schedulers, folder)
  check_count("data loader(s)", s.saved.counts.dataloaders, now.dataloaders, folder)
  check_count("registered object(s)", s.saved.counts.custom, now.custom, folder)
  s.models, s.optimizers, s.schedulers, s.customs, s.loaders = {}, {}, {}, {}, {}
  -- Sharded models saved as each rank's slices: this rank's own files when
  -- the layout is the one it has now, else the full state from every rank's.
  s.own, s.own_optimizers, s.model_files = {}, {}, {}
  local rank = c.state.process_index
  for i, model in ipairs(c.models) do
    if listed[names.sharding(i)] then
      local saved = sharded_state.check_layout(read_value(names.sharding(i)), folder .. "/" .. names.sharding(i))
      local j = saved.optimizer
      local sharded, info = c.sharded_models[model], c.shard_layouts[model]
      local current = sharded and sharded_state.layout(sharded, info.optimizer, info.param_names, c.state.num_processes)
      if current and sharded_state.same_layout(saved, current) then
        s.own[i] = { sharded = sharded, optimizer = info.optimizer, tensors = read_tensors(names.model_slices(i, rank)),
                     optimizer_state = read_tensors(names.optimizer_slices(j, rank)) }
        s.own_optimizers[j] = true
      else
        local models, optimizers = {}, {}
        for r = 0, saved.world_size - 1 do
          models[r + 1] = read_tensors(names.model_slices(i, r))
          optimizers[r + 1] = read_tensors(names.optimizer_slices(j, r))
        end
        s.models[i] = sharded_state.full_model(saved, models)
        s.model_files[i] = names.sharding(i)
        s.optimizers[j] = sharded_state.full_optimizer(saved, optimizers)
      end
    else
      s.models[i] = read_tensors(names.model(i))
    end
  end
  for j = 1, now.optimizers do
    if not s.optimizers[j] and not s.own_optimizers[j] then s.optimizers[j] = read_tensors(names.optimizer(j)) end
  end
  for i = 1, now.schedulers do s.schedulers[i] = read_value(names.scheduler(i)) end
  for i = 1, now.custom do s.customs[i] = read_value(names.custom(i)) end
  s.scaler = c.gradient_state.scaler and read_value(names.scaler)
  s.same_world = manifest.world_size == c.state.num_processes
  -- On another world size every rank continues from rank 0's position,
  -- which the loader re-shards over the current ranks.
  s.loader_rank = s.same_world and c.state.process_index or 0
  for i = 1, now.dataloaders do s.loaders[i] = read_value(names.dataloader(i, s.loader_rank)) end
  s.rng = listed[names.rng(rank)] and read_tensors(names.rng(rank))
  -- Accumulated gradients are this rank's partial sums: they mean nothing
  -- on another world size.
  s.gradients = {}
  if s.same_world then
    for i, model in ipairs(c.models) do
      local name = names.gradients(i, rank)
      s.gradients[i] = listed[name] and read_tensors(name)
      local holders = gradient_holders(c, model)
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
      apply(path(names.model_slices(i, c.state.process_index)), sharded_state.restore_own, own.sharded, model,
            own.optimizer, own.tensors, own.optimizer_state)
    else
      c.with_full_parameters(model, function()
        apply(path(s.model_files[i] or names.model(i)), model.load_state_dict, model, s.models[i])
      end, true)
    end
  end
  for i, opt in ipairs(c.optimizers) do
    if not s.own_optimizers[i] then apply(path(names.optimizer(i)), opt.load_state_dict, opt, s.optimizers[i]) end
    opt.updates = saved.optimizer_updates[i]
  end
  for i, sched in ipairs(c.schedulers) do
    apply(path(names.scheduler(i)), sched.load_state_dict, sched, s.schedulers[i])
    sched.seen = saved.scheduler_seen[i]
  end
  for i, obj in ipairs(c.custom_objects) do
    apply(path(names.custom(i)), obj.load_state_dict, obj, s.customs[i])
  end
  c.gradient_state:load_state_dict({ micro_step = saved.micro_step, sync_steps = saved.sync_steps, items = saved.items,
                                     sync_gradients = saved.sync_gradients, scaler = s.scaler })
  for i, model in ipairs(c.models) do
    local grads = s.gradients[i] or {}
    for name, holder in pairs(gradient_holders(c, model)) do
      apply(path(names.gradients(i, c.state.process_index)), function() holder.grad = grads[name] end)
    end
  end
  for i, loader in ipairs(c.dataloaders) do
    apply(path(names.dataloader(i, s.loader_rank)), loader.load_state_dict, loader, s.loaders[i])
  end
  if s.rng then
    ck.set_generator_state(s.rng.generator)
    core.set_math_random_state(s.rng.math_random)
    -- Saved on a GPU and resumed on the CPU (or the reverse): the CPU
    -- generators are restored, the GPU's stays as seeded.
    if s.rng.cuda_generator and c.state.device ~= "cpu" then core.cuda.set_rng_state(s.rng.cuda_generator) end
  end
end

function checkpointing.load_state(c, dir)
  local where = "Accelerator:load_state"
  local folder = load_folder(c, dir)
  -- Every rank reads and verifies its share; if any fails, all stop before
  -- changing anything.
  local ok, s = pcall(read_checkpoint, c, folder)
  agree(c, where, ok and {} or { failure = reason(s) })
  -- A state that one rank's object refuses (its loader's position, a
  -- registered object) fails every rank too; the objects restored before
  -- that one keep what they were given.
  agree(c, where, try(restore, c, folder, s))

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
  -- The next automatic save follows the one loaded.
  local config = automatic(c)
  if config and folder == config:checkpoints_dir() .. "/checkpoint_" .. manifest.iteration then
    config.iteration = manifest.iteration + 1
  end
  return folder
end

-- Registered objects ---------------------------------------------------------

-- Appends to `custom_objects` (the Accelerator's list) each argument.
function checkpointing.register(custom_objects, ...)
  for i = 1, select("#", ...) do
    local obj = select(i, ...)
    if type(obj) ~= "table" and type(obj) ~= "userdata" or type(obj.state_dict) ~= "function"
       or type(obj.load_state_dict) ~= "function" then
      args.error(string.format("Accelerator:register_for_checkpointing: argument %d (a %s) has no "
                               .. "state_dict and load_state_dict methods", i, type(obj)))
    end
    custom_objects[#custom_objects + 1] = obj
  end
end

-- Weights for other tools ----------------------------------------------------

-- `state`: the PartialState; its main process writes.
function checkpointing.save_model(state, model, dir, options)
  local o = args.options("Accelerator:save_model", options,
                         { safe_serialization = true, max_shard_size = "2GB" })
  if type(dir) ~= "string" then args.error("Accelerator:save_model: the folder must be a string, got a " .. type(dir)) end
  local files
  if state.is_main_process then files = ck.save_weights(dir, ordered_state(model), o) end
  state:wait_for_everyone()
  return files
end

function checkpointing.load_model(model, dir, options)
  local o = args.options("Accelerator:load_model", options, { strict = true })
  if type(dir) ~= "string" then args.error("Accelerator:load_model: the folder must be a string, got a " .. type(dir)) end
  local weights = ck.load_weights(dir)
  local ok, err = pcall(apply, dir, model.load_state_dict, model, weights, o.strict)
  if not ok then args.error("Accelerator:load_model: " .. err) end
end

return checkpointing
