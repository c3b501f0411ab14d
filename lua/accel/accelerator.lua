-- The Accelerator: what a recipe calls to train the same loop on any number
-- of ranks, with gradient accumulation and mixed precision. The contract is
-- in docs/api/accelerator.md; collectives live in gathering.lua, the
-- gradient methods in accelerator_gradients.lua, and the prepared optimizer
-- and scheduler in their own files.
local core = require("accel.core")
local Module = require("accel.nn.module")
local DataLoader = require("accel.data.dataloader")
local AcceleratedOptimizer = require("accel.accelerated_optimizer")
local AcceleratedScheduler = require("accel.accelerated_scheduler")
local gathering = require("accel.gathering")
local checkpointing = require("accel.checkpointing")
local ProjectConfiguration = require("accel.project_configuration")
local PartialState = require("accel.partial_state")
local GradientAccumulationPlugin = require("accel.gradient_accumulation_plugin")
local GradientState = require("accel.gradient_state")
local tracking = require("accel.tracking")
local tensor_tree = require("accel.tensor_tree")
local random_state = require("accel.random_state")
local sharding_settings = require("accel.sharding.settings")
local shard_model = require("accel.sharding.shard_model")
local module_states = require("accel.sharding.module_states")
local init_empty_weights = require("accel.big_modeling.init_empty_weights")
local float8 = require("accel.float8")
local ParallelismConfig = require("accel.parallelism_config")
local accelerator_mesh = require("accel.parallel.accelerator_mesh")
local live = require("accel.live.control")
local async_save = require("accel.live.async_save")
local mesh_sharding = require("accel.parallel.mesh_sharding")

local dist = core.dist
local args_error = require("accel.args").error

local Accelerator = {}

-- Accelerate's properties that live in the GradientState.
local gradient_state_fields = {
  sync_gradients = "sync_gradients",
  gradient_accumulation_steps = "num_steps",
  sync_with_dataloader = "sync_with_dataloader",
}

function Accelerator.__index(self, key)
  local field = gradient_state_fields[key]
  if field then return rawget(self, "gradient_state")[field] end
  return Accelerator[key]
end

function Accelerator.__newindex(self, key, value)
  local field = gradient_state_fields[key]
  if field then
    rawget(self, "gradient_state")[field] = value
  else
    rawset(self, key, value)
  end
end

local defaults = {
  mixed_precision = "no",
  gradient_accumulation_steps = 1,
  cpu = false,
  even_batches = true,
  split_batches = false,
  dispatch_batches = false,  -- the main process reads every batch and sends each rank its part
  bucket_bytes = 25 * 1024 * 1024,
  seed = false,
  loss_scaler = false,  -- fp16: {init_scale, growth_factor, backoff_factor, growth_interval}
  project_config = false,  -- accel.ProjectConfiguration: where save_state() writes by itself
  gradient_accumulation_plugin = false,  -- accel.GradientAccumulationPlugin
  sync_each_batch = false,  -- all-reduce gradients on every micro-step (see gradient_accumulation_plugin.lua)
  project_dir = false,  -- the project folder; project_config's project_dir defaults to it
  log_with = false,  -- trackers: "jsonl", "tensorboard", "all" or a list (tracking.lua)
  zero_stage = false,  -- 1, 2 or 3: sharded data parallel (sharding/settings.lua)
  fsdp_plugin = false,  -- accel.FullyShardedDataParallelPlugin: the same in FSDP's words
  cuda_graphs = false,  -- true or {warmup = n}: train_step captures and replays (cuda_graphs.lua)
  parallelism_config = false,  -- accel.ParallelismConfig: acc.mesh (parallel/accelerator_mesh.lua)
}

local function fail(message)
  error("accel.Accelerator: " .. message, 4)
end

local function check_options(options)
  for key in pairs(options) do
    if defaults[key] == nil then
      local known = {}
      for k in pairs(defaults) do known[#known + 1] = k end
      table.sort(known)
      fail(string.format("unknown option '%s' (known: %s)", tostring(key), table.concat(known, ", ")))
    end
  end
  local precision = options.mixed_precision
  if precision ~= nil and precision ~= "no" and precision ~= "bf16" and precision ~= "fp16" and precision ~= "fp8" then
    fail("mixed_precision must be 'no', 'bf16', 'fp16' or 'fp8', got '" .. tostring(precision) .. "'")
  end
  if options.project_config and not ProjectConfiguration.is(options.project_config) then
    fail("project_config must be made by accel.ProjectConfiguration{...}")
  end
  if options.parallelism_config and not ParallelismConfig.is(options.parallelism_config) then
    fail("parallelism_config must be made by accel.ParallelismConfig{...}")
  end
  local plugin = options.gradient_accumulation_plugin
  if plugin and not GradientAccumulationPlugin.is(plugin) then
    fail("gradient_accumulation_plugin must be made by accel.GradientAccumulationPlugin{...}")
  end
  if plugin and options.gradient_accumulation_steps ~= nil then
    fail("give gradient_accumulation_steps or gradient_accumulation_plugin, not both")
  end
  if options.sync_each_batch ~= nil and type(options.sync_each_batch) ~= "boolean" then
    fail("sync_each_batch must be a boolean, got " .. tostring(options.sync_each_batch))
  end
  if options.project_dir ~= nil and type(options.project_dir) ~= "string" then
    fail("project_dir must be a string, got a " .. type(options.project_dir))
  end
  if options.log_with ~= nil and options.log_with ~= false then
    local _, problem = tracking.kinds(options.log_with)
    if problem then fail(problem) end
    local config = options.project_config
    if not options.project_dir and not (config and config.project_dir) then
      fail("log_with needs a folder for the runs: give project_dir (or a project_config with one)")
    end
  end
  local steps = options.gradient_accumulation_steps
  if steps ~= nil and (type(steps) ~= "number" or steps < 1 or steps % 1 ~= 0) then
    fail("gradient_accumulation_steps must be a positive integer, got " .. tostring(steps))
  end
end

-- What accel-run was told (--mixed-precision, or the config file's keys)
-- is the default for what the recipe leaves unsaid.
local function launcher_defaults()
  local launch = core.launch or {}
  return {
    mixed_precision = launch.mixed_precision,
    gradient_accumulation_steps = launch.gradient_accumulation_steps,
  }
end

local function new(_, options)
  options = options or {}
  check_options(options)
  local state = PartialState{ cpu = options.cpu }
  local from_launcher = launcher_defaults()
  local plugin = options.gradient_accumulation_plugin or nil
  local function option(name)
    if options[name] ~= nil then return options[name] end
    if from_launcher[name] ~= nil then return from_launcher[name] end
    return defaults[name]
  end
  local mixed_precision = option("mixed_precision")
  local self = setmetatable({
    state = state,  -- the process facts below are copied from it
    mixed_precision = mixed_precision,
    sync_each_batch = plugin and plugin.sync_each_batch or option("sync_each_batch"),
    -- Synchronisation, the active loaders and the fp16 loss scaler
    -- (gradient_state.lua); sync_gradients, gradient_accumulation_steps
    -- and sync_with_dataloader read and write it.
    gradient_state = GradientState{
      num_steps = plugin and plugin.num_steps or option("gradient_accumulation_steps"),
      sync_with_dataloader = not plugin or plugin.sync_with_dataloader,
      scaler = mixed_precision == "fp16" and core.amp.LossScaler(options.loss_scaler or {}) or nil,
    },
    even_batches = option("even_batches"),
    split_batches = option("split_batches"),
    dispatch_batches = option("dispatch_batches"),
    bucket_bytes = option("bucket_bytes"),
    _models = {},       -- {model, sync, sharded, no_sync}: sync is the model's GradientSync
    -- What save_state writes besides the models, in preparation order.
    _optimizers = {},
    _schedulers = {},
    _dataloaders = {},
    _custom_objects = {},
    project_configuration = option("project_config") or ProjectConfiguration{},
    _trigger = false,
    log_with = options.log_with and tracking.kinds(options.log_with) or {},
    trackers = {},  -- init_trackers fills it
    _log_calls = 0,  -- the step of a log call that gives none
  }, Accelerator)
  for _, name in ipairs(PartialState.FACTS) do self[name] = state[name] end
  -- nil for plain data parallel, else what is sharded and how.
  self.sharding = sharding_settings.resolve("accel.Accelerator", options.zero_stage or nil, options.fsdp_plugin or nil)
  if self.sharding then self.distributed_type = self.sharding.name end
  -- The recipe's parallelism_config, else the launch's sizes (--parallelism-config-*).
  local parallelism_config = options.parallelism_config or ParallelismConfig.from_launch()
  if parallelism_config then
    self.mesh, self._mesh_state_dict_type = accelerator_mesh.make(parallelism_config, self.sharding)
    -- FSDP over dp_shard when dp_shard_size > 1; an fsdp_plugin over a
    -- dp_shard of 1 shards nothing (accelerator_mesh.make).
    self.sharding = mesh_sharding.settings(parallelism_config, self.sharding, options.fsdp_plugin or nil)
    if self.sharding then self.distributed_type = self.sharding.name end
  end
  -- As Accelerate: the configuration's own project_dir wins; the
  -- Accelerator's fills it in when it has none.
  if options.project_dir and not self.project_configuration.project_dir then
    self.project_configuration:set_directories(options.project_dir)
  end
  self.project_dir = self.project_configuration.project_dir
  self.cuda_graphs = Accelerator._cuda_graph_settings(option("cuda_graphs"))
  if mixed_precision == "fp8" then float8.check(self.device, fail) end
  if options.seed then random_state.set_seed(options.seed) end
  return self
end

-- Preparation ---------------------------------------------------------------

local function is_optimizer(v)
  return type(v) == "userdata" and getmetatable(v) ~= nil and v.step ~= nil and v.zero_grad ~= nil
end

local function is_scheduler(v)
  return type(v) == "table" and getmetatable(v) ~= DataLoader and not Module.is_module(v)
     and type(v.step) == "function" and type(v.get_last_lr) == "function"
end

-- Floating tensors (and tables of them) back to float32: autocast outputs
-- bf16 or fp16, and losses computed from them should not be.
local function to_float32(value)
  return tensor_tree.map(value, function(t)
    return (t.dtype == "bfloat16" or t.dtype == "float16") and t:float() or t
  end)
end

local function convert_results(...)
  local n, out = select("#", ...), { ... }
  for i = 1, n do out[i] = to_float32(out[i]) end
  return unpack(out, 1, n)
end

-- Plain data parallel: weights on the meta device (built under
-- accel.init_empty_weights, or offloaded to disk by
-- load_checkpoint_and_dispatch, which Accelerate refuses to prepare too)
-- have no values to train or broadcast; new tensors made for them here would
-- not be the optimizer's. Sharding takes them on ranks other than the main
-- process (module_states.lua).
local function refuse_meta_weights(model)
  local empty = {}
  for name, t in pairs(model:state_dict()) do
    if t.device == "meta" then empty[#empty + 1] = name end
  end
  if #empty == 0 then return end
  table.sort(empty)
  args_error(string.format("Accelerator:prepare: the model's %s on the meta device (built under "
                           .. "accel.init_empty_weights, or offloaded to disk): load its weights into memory "
                           .. "(accel.load_checkpoint_and_dispatch) or give them memory (model:to_empty) "
                           .. "before making its optimizer, or shard it (zero_stage or fsdp_plugin), which "
                           .. "gives the other ranks the main process's weights",
                           table.concat(empty, ", ", 1, math.min(#empty, 3)) .. (#empty > 3 and ", ..." or "")
                             .. (#empty > 1 and " are" or " is")))
end

-- Where the gradients are: the models' parameters, or at ZeRO stages 2 and
-- 3 the shards, whose gradients are this rank's slices.
local function gradient_holders(self)
  local out = {}
  for _, entry in ipairs(self._models) do
    local holders = entry.sharded and entry.sharded:holds_gradient_slices() and entry.sharded:shards() or entry.model:parameters()
    for _, p in ipairs(holders) do out[#out + 1] = p end
  end
  return out
end

-- An fp16 overflow in one rank's gradient slices skips the step on all.
local function overflow_anywhere(self, found_inf)
  local flag = core.tensor({ found_inf and 1 or 0 }, { dtype = "float32" })
  dist.all_reduce(flag, "max")
  return flag:item() > 0
end

-- `optimizer` (the engine optimizer holding the model's parameters) is
-- needed when the Accelerator shards: it is pointed at the shards.
function Accelerator:prepare_model(model, optimizer)
  local entry = { model = model, no_sync = false }
  if self.sharding then
    if not optimizer then
      args_error("Accelerator:prepare: with zero_stage or fsdp_plugin, prepare each model together with its "
                 .. "optimizer (one prepare call), so that the optimizer steps the model's shards")
    end
    if self.sharding.cpu_offload and self.device ~= "cpu" then
      args_error("Accelerator:prepare: cpu_offload on a GPU is not supported yet (docs/api/sharding.md)")
    end
    if self.mesh then  -- over the mesh's dp_shard x cp (parallel/mesh_sharding.lua)
      refuse_meta_weights(model)
      entry.sharded, entry.param_names = mesh_sharding.shard_model(self.mesh, model, optimizer, self.sharding,
                                                                   self.bucket_bytes, self.device)
    else
      -- Every rank takes the main process's weights, so the others may have
      -- built the model on the meta device (module_states.lua).
      module_states.check(self._world, model, "Accelerator:prepare")
      module_states.sync_buffers(model, self.device, self.num_processes)
      entry.sharded, entry.param_names = shard_model(model, optimizer, self.sharding, self.bucket_bytes, self.device)
    end
    entry.optimizer = optimizer
    entry.sync = entry.sharded
    if entry.sharded:holds_gradient_slices() and self.num_processes > 1 then
      self.gradient_state._agree_overflow = function(found_inf) return overflow_anywhere(self, found_inf) end
    end
  elseif self.mesh then
    refuse_meta_weights(model)
    if self.device ~= "cpu" then model:to(self.device) end
    entry.sync = accelerator_mesh.prepare_model(self.mesh, model, self.bucket_bytes)
    -- The ranks of a tp group hold different slices of the gradients: an
    -- fp16 overflow in one rank's skips the step on all, as when sharded.
    if self.mesh.tp.size > 1 then
      self.gradient_state._agree_overflow = function(found_inf) return overflow_anywhere(self, found_inf) end
    end
  else
    refuse_meta_weights(model)
    if self.device ~= "cpu" then model:to(self.device) end
    if self.num_processes > 1 then
      core.no_grad(function()
        for _, p in ipairs(model:parameters()) do dist.broadcast(p, 0) end
        for _, b in ipairs(model:buffers()) do dist.broadcast(b, 0) end
      end)
    end
    -- The reducer synchronises gradients at every world size (alone, it only
    -- divides by the items counted).
    entry.sync = dist.GradientReducer(model:parameters(), self.bucket_bytes)
  end
  self._models[#self._models + 1] = entry
  self.gradient_state:_set_parameters(gradient_holders(self))
  if self.mixed_precision == "fp8" then float8.convert(model) end
  if self:_autocast_dtype() then
    local forward = model.forward
    rawset(model, "forward", function(m, ...)
      local args, n = { ... }, select("#", ...)
      return convert_results(core.amp.autocast(function() return forward(m, unpack(args, 1, n)) end,
                                               self:_autocast_dtype(), self.device))
    end)
    entry.unwrapped_forward = forward
  end
  return model
end

-- Builds a model with fn (which may also load its weights) so that prepare
-- can shard it without every rank holding it whole: the main process runs
-- fn as is; the others run it under accel.init_empty_weights when the
-- sharding settings ask for it (FSDP's cpu_ram_efficient_loading,
-- DeepSpeed's zero3_init_flag at stage 3), as transformers' from_pretrained
-- does under Accelerate. Otherwise every rank runs fn as is. Returns what fn
-- returns.
function Accelerator:build_model(fn)
  if type(fn) ~= "function" then
    args_error("Accelerator:build_model: expected a function that builds the model, got a " .. type(fn))
  end
  if self.sharding and self.sharding.empty_init and not self.is_main_process then
    return init_empty_weights(fn)
  end
  return fn()
end

function Accelerator:prepare_data_loader(loader)
  loader.device = self.device
  -- Under a mesh the ranks of one dp group share their data (tp ranks see the same batches).
  local dp = self.mesh and self.mesh.dp
  loader:shard(dp and dp.rank or self.process_index, dp and dp.size or self.num_processes, {
    even_batches = self.even_batches,
    split_batches = self.split_batches,
    dispatch_batches = self.dispatch_batches,
    state = self.gradient_state,
  })
  self._dataloaders[#self._dataloaders + 1] = loader
  return loader
end

function Accelerator:prepare_optimizer(optimizer)
  local prepared = AcceleratedOptimizer.new(optimizer, self.gradient_state)
  prepared.live = live.controller(self)
  for _, entry in ipairs(self._models) do
    if entry.optimizer == optimizer then prepared:_step_shards_of(entry.sharded) end
  end
  self._optimizers[#self._optimizers + 1] = prepared
  return prepared
end

function Accelerator:prepare_scheduler(scheduler, optimizer)
  if not optimizer then
    error("Accelerator:prepare: a scheduler needs its optimizer prepared in the same call", 3)
  end
  local prepared = AcceleratedScheduler.new(scheduler, optimizer)
  self._schedulers[#self._schedulers + 1] = prepared
  return prepared
end

-- Prepares models, optimizers, data loaders and schedulers, in any order;
-- returns them in the order given.
function Accelerator:prepare(...)
  local out, n = {}, select("#", ...)
  local optimizer, first_loader
  -- Models first, given the call's first optimizer: sharding points it at
  -- their shards before it is prepared.
  local raw_optimizer
  for i = 1, n do
    local obj = select(i, ...)
    if is_optimizer(obj) then raw_optimizer = raw_optimizer or obj end
  end
  for i = 1, n do
    local obj = select(i, ...)
    if Module.is_module(obj) then out[i] = self:prepare_model(obj, raw_optimizer) end
  end
  for i = 1, n do
    local obj = select(i, ...)
    if getmetatable(obj) == DataLoader then
      out[i] = self:prepare_data_loader(obj)
      first_loader = first_loader or obj
    elseif is_optimizer(obj) then
      out[i] = self:prepare_optimizer(obj)
      optimizer = optimizer or out[i]
    elseif not is_scheduler(obj) and not Module.is_module(obj) then
      error(string.format("Accelerator:prepare: argument %d (a %s) is not a model, optimizer, data loader or scheduler",
                          i, type(obj)), 2)
    end
  end
  for i = 1, n do  -- schedulers last: they follow their optimizer's updates
    local obj = select(i, ...)
    if is_scheduler(obj) then out[i] = self:prepare_scheduler(obj, optimizer) end
  end
  if optimizer and first_loader and first_loader.kind ~= "iterable" then
    local batches = first_loader:num_batches()
    self:print(string.format("accel: %d batches per epoch on each of %d rank(s), %d optimizer updates per epoch",
                             batches, self.num_processes,
                             math.ceil(batches / self.gradient_accumulation_steps)))
  end
  return unpack(out, 1, n)
end

-- Gradients (lua/accel/accelerator_gradients.lua) ---------------------------

local function entry_of(self, model)
  for _, entry in ipairs(self._models) do
    if entry.model == model then return entry end
  end
  error("the model was not prepared by this Accelerator", 3)
end

require("accel.accelerator_gradients")(Accelerator, entry_of)
require("accel.profiling")(Accelerator)
require("accel.cuda_graphs")(Accelerator)

-- The dtype the forward pass autocasts to, or nil: bf16 on any device;
-- fp16 on the GPU (the CPU computes fp16 runs in float32 and scales the
-- loss only, as LibTorch 1.13 has no CPU fp16 autocast).
function Accelerator:_autocast_dtype()
  if self.mixed_precision == "bf16" or self.mixed_precision == "fp8" then return "bfloat16" end
  if self.mixed_precision == "fp16" and self.device ~= "cpu" then return "float16" end
  return nil
end

-- Runs fn under the configured mixed precision (autocast, see _autocast_dtype).
function Accelerator:autocast(fn)
  local dtype = self:_autocast_dtype()
  if not dtype then return fn() end
  return convert_results(core.amp.autocast(fn, dtype, self.device))
end

-- Trains fn's loop on ranks with different numbers of batches (join.lua).
function Accelerator:join_uneven_inputs(models, fn, options)
  return require("accel.join")(self, models, fn, options)
end

-- Collectives ----------------------------------------------------------------
-- gather, reduce, broadcast, pad_across_processes, gather_object,
-- split_between_processes, wait_for_everyone and synchronize_rng_states
-- come from PartialState.

-- Like gather, without the samples repeated to even out the last batch.
function Accelerator:gather_for_metrics(value)
  return gathering.gather_for_metrics(self._world, value, self.gradient_state.batch_padding)
end

-- Process helpers ------------------------------------------------------------
-- print, main_process_first and the on_* helpers come from PartialState.

-- set_trigger() on any rank makes the next check_trigger() true on all.
function Accelerator:set_trigger()
  self._trigger = true
end

function Accelerator:check_trigger()
  local flag = core.tensor({ self._trigger and 1 or 0 }, { dtype = "float32" })
  if self.num_processes > 1 then dist.all_reduce(flag, "max") end
  self._trigger = false
  return flag:item() > 0
end

-- Runs fn() with the full parameters of `model` in place: at ZeRO stage 3
-- every rank gathers them for the call (a collective: call it on every
-- rank). With `written`, fn wrote them and the shards take what it wrote.
function Accelerator:_with_full_parameters(model, fn, written)
  local sharded
  for _, entry in ipairs(self._models) do
    if entry.model == model then sharded = entry.sharded end
  end
  if sharded then sharded:gather_all() end
  local results = { pcall(fn) }
  if sharded then
    if written and results[1] then sharded:keep_written_parameters() end
    sharded:release_all()
  end
  if not results[1] then error(results[2], 0) end
  return unpack(results, 2, table.maxn(results))
end

-- The model's parameters and buffers by name, full (gathered at ZeRO stage
-- 3) and copied: Accelerate's get_state_dict. Call it on every rank.
function Accelerator:get_state_dict(model)
  if self.mesh and self.mesh.tp.size > 1 then
    return self:_with_full_parameters(model, function() return accelerator_mesh.full_state_dict(self.mesh, model) end)
  end
  return self:_with_full_parameters(model, function()
    local out = {}
    for name, t in pairs(model:state_dict()) do out[name] = t:clone() end
    return out
  end)
end

function Accelerator:unwrap_model(model, options)
  local entry = entry_of(self, model)
  if entry.unwrapped_forward and options and options.keep_fp32_wrapper == false then
    rawset(model, "forward", nil)
    entry.unwrapped_forward = nil
  end
  return model
end

-- Drops the Accelerator's references to prepared objects, collects, and
-- gives the CPU allocator's pooled blocks back.
function Accelerator:free_memory()
  self._models, self._optimizers, self._schedulers, self._dataloaders = {}, {}, {}, {}
  self.gradient_state:_set_parameters({})
  self.gradient_state._agree_overflow = nil
  collectgarbage()
  collectgarbage()
  core.release_pooled_blocks()
end

-- Checkpoints (lua/accel/checkpointing.lua) ----------------------------------

-- Automatic checkpoint naming without a project folder fails on every rank
-- alike, before any collective.
function Accelerator:_check_project_folder(where)
  local config = self.project_configuration
  if config.automatic_checkpoint_naming then config:checkpoints_dir(where) end
end

-- What a checkpoint holds, as the lists checkpointing.lua takes.
function Accelerator:_checkpoint_contents()
  local models, sharded, layouts = {}, {}, {}
  for i, entry in ipairs(self._models) do
    models[i] = entry.model
    if entry.sharded then
      sharded[entry.model] = entry.sharded
      layouts[entry.model] = { optimizer = entry.optimizer, param_names = entry.param_names }
    end
  end
  return {
    sharded_models = sharded,
    shard_layouts = layouts,
    sharded_state_dict = (self.sharding or {}).state_dict_type == "SHARDED_STATE_DICT"
      or self._mesh_state_dict_type == "SHARDED_STATE_DICT",
    mesh = self.mesh,
    with_full_parameters = function(model, fn, written) return self:_with_full_parameters(model, fn, written) end,
    state = self.state,
    project_configuration = self.project_configuration,
    gradient_state = self.gradient_state,
    models = models,
    optimizers = self._optimizers,
    schedulers = self._schedulers,
    dataloaders = self._dataloaders,
    custom_objects = self._custom_objects,
    live = self._live,
  }
end

-- Writes everything needed to resume exactly into `dir` (or, with
-- automatic checkpoint naming, the next project checkpoint); returns the folder.
function Accelerator:save_state(dir, options)
  if dir == nil then self:_check_project_folder("Accelerator:save_state") end
  if options ~= nil then return async_save.save_state(self, dir, options) end  -- {async = true}: live/async_save.lua
  return checkpointing.save_state(self:_checkpoint_contents(), dir)
end

-- Restores what save_state wrote; without `dir`, the newest complete
-- automatic checkpoint. Returns the folder loaded.
function Accelerator:load_state(dir)
  if dir == nil then self:_check_project_folder("Accelerator:load_state") end
  return checkpointing.load_state(self:_checkpoint_contents(), dir)
end

-- Objects with state_dict/load_state_dict to include in checkpoints.
Accelerator.on_control = live.on_control  -- named control hooks (docs/live-runs.md)
Accelerator.spike_guard = live.spike_guard
Accelerator.wait_for_checkpoint = async_save.wait_for_checkpoint

function Accelerator:register_for_checkpointing(...)
  checkpointing.register(self._custom_objects, ...)
end

-- Weights for other tools: {safe_serialization = true, max_shard_size = "2GB"}.
-- Full weights also when sharded: call it on every rank.
function Accelerator:save_model(model, dir, options)
  if self.mesh then  -- the full weights, gathered over dp_shard (FSDP), then over tp
    local full = self:_with_full_parameters(model, function() return accelerator_mesh.full_state_dict(self.mesh, model) end)
    return checkpointing.save_model(self.state, model, dir, options, full)
  end
  return self:_with_full_parameters(model, function()
    return checkpointing.save_model(self.state, model, dir, options)
  end)
end

function Accelerator:load_model(model, dir, options)
  if self.mesh then  -- full weights, each tp rank keeping its slice (and each dp_shard rank its shards)
    return self:_with_full_parameters(model, function()
      checkpointing.load_model(model, dir, options, function(weights)
        return accelerator_mesh.slice_state_dict(self.mesh, model, weights, dir)
      end)
    end, true)
  end
  self:_with_full_parameters(model, function() checkpointing.load_model(model, dir, options) end, true)
end

-- Trackers (lua/accel/tracking.lua) -------------------------------------------

-- Starts the trackers log_with named, writing under <project_dir>/<name>/,
-- and records `config` (a table of hyperparameters) in them.
function Accelerator:init_trackers(name, config)
  if type(name) ~= "string" or name == "" then
    args_error("Accelerator:init_trackers: the run name must be a non-empty string, got " .. tostring(name))
  end
  if #self.trackers > 0 then
    args_error("Accelerator:init_trackers: trackers for run '" .. self.trackers[1].run_name
               .. "' are open; end_training() closes them")
  end
  -- On every rank, so that a bad name fails them all alike.
  local ok, why = pcall(core.tracking.check_run_name, name)
  if not ok then args_error("Accelerator:init_trackers: " .. tostring(why):gsub("^.-check_run_name: ", "")) end
  local flat = tracking.config(config, "Accelerator:init_trackers")
  local run_dir = self.project_dir and (self.project_dir .. "/" .. name)
  for i, kind in ipairs(self.log_with) do
    local tracker = self.is_main_process and tracking.open(kind, run_dir) or tracking.blank(kind)
    tracker.run_name = name
    tracker:store_init_configuration(flat)
    self.trackers[i] = tracker
  end
  self._log_calls = 0
end

-- Logs {name = number} (one-element tensors and nested tables allowed) at
-- `step`, or, without one, at the number of earlier log calls.
function Accelerator:log(values, step)
  if step == nil then step = self._log_calls end
  self._log_calls = self._log_calls + 1
  if type(step) ~= "number" or step % 1 ~= 0 then
    args_error("Accelerator:log: step must be an integer, got " .. tostring(step))
  end
  -- Checked on every rank, so a bad value fails all ranks alike.
  local scalars = tracking.scalars(values, "Accelerator:log")
  if not self.is_main_process then return end
  for _, tracker in ipairs(self.trackers) do tracker.writer:log(step, scalars) end
end

-- The tracker named `name` ("jsonl", "tensorboard") after init_trackers.
function Accelerator:get_tracker(name)
  for _, tracker in ipairs(self.trackers) do
    if tracker.name == name then return tracker end
  end
  args_error(string.format("Accelerator:get_tracker: no tracker '%s' is open (log_with: %s)", tostring(name),
                           #self.log_with > 0 and table.concat(self.log_with, ", ") or "none"))
end

-- Flushes and closes the trackers, then waits for every rank.
function Accelerator:end_training()
  self:wait_for_checkpoint()
  for _, tracker in ipairs(self.trackers) do tracker:finish() end
  self.trackers = {}
  self:wait_for_everyone()
end

return setmetatable(Accelerator, { __index = PartialState, __call = new })
