-- The Accelerator: what a recipe calls to train the same loop on any number
-- of ranks, with gradient accumulation and mixed precision. The contract is
-- in docs/api/accelerator.md; preparation is in accelerator_preparation.lua
-- (the parallelisms in parallel/), collectives in gathering.lua, the
-- gradient methods in accelerator_gradients.lua, and the prepared optimizer
-- and scheduler in their own files.
local core = require("accel.core")
local gathering = require("accel.gathering")
local checkpointing = require("accel.checkpointing")
local ProjectConfiguration = require("accel.project_configuration")
local PartialState = require("accel.partial_state")
local GradientAccumulationPlugin = require("accel.gradient_accumulation_plugin")
local GradientState = require("accel.gradient_state")
local tracking = require("accel.tracking")
local random = require("accel.util.random")
local float8 = require("accel.float8")
local ParallelismConfig = require("accel.parallel.parallelism_config")
local ParallelDims = require("accel.parallel.parallel_dims")
local ModelLayout = require("accel.parallel.model_layout")
local SplitCheckpoint = require("accel.parallel.checkpoint.split_checkpoint")
local dist = core.dist
-- Loaded for a pipeline only (the heap: lua/accel/init.lua).
local function pipeline_weights() return require("accel.parallel.pipeline.pipeline_weights") end
local args_error = require("accel.util.args").error

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
  zero_stage = false,  -- 1, 2 or 3: sharded data parallel (parallel/fsdp/sharding_settings.lua)
  fsdp_plugin = false,  -- accel.FullyShardedDataParallelPlugin: the same in FSDP's words
  deepspeed_plugin = false,  -- accel.DeepSpeedPlugin: zero_stage and ZeRO-Offload in DeepSpeed's words
  cuda_graphs = false,  -- true or {warmup = n}: train_step captures and replays (cuda_graphs.lua)
  parallelism_config = false,  -- accel.ParallelismConfig: acc.mesh (parallel/parallel_dims.lua)
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
  -- How the work is split (parallel/parallel_dims.lua): sharding, the mesh.
  local parallel = ParallelDims.new({
    zero_stage = options.zero_stage or nil, fsdp_plugin = options.fsdp_plugin or nil,
    deepspeed_plugin = options.deepspeed_plugin or nil,
    parallelism_config = options.parallelism_config or nil,
    world = state._world, device = state.device, num_processes = state.num_processes,
    bucket_bytes = option("bucket_bytes"),
  })
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
    _parallel = parallel,
    mesh = parallel.mesh,  -- acc.mesh, nil without a parallelism_config
    sharding = parallel.sharding,  -- nil for plain data parallel, else what is sharded and how
    _models = {},       -- each prepared model's ModelLayout (parallel/model_layout.lua)
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
  self.distributed_type = parallel.distributed_type or self.distributed_type
  -- As Accelerate: the configuration's own project_dir wins; the
  -- Accelerator's fills it in when it has none.
  if options.project_dir and not self.project_configuration.project_dir then
    self.project_configuration:set_directories(options.project_dir)
  end
  self.project_dir = self.project_configuration.project_dir
  self.cuda_graphs = Accelerator._cuda_graph_settings(option("cuda_graphs"))
  if mixed_precision == "fp8" then float8.check(self.device, fail) end
  if options.seed then random.set_seed(options.seed) end
  return self
end

-- Preparation (lua/accel/accelerator_preparation.lua) -----------------------

local convert_results = require("accel.accelerator_preparation")(Accelerator)

-- Gradients (lua/accel/accelerator_gradients.lua) ---------------------------

local function entry_of(self, model)
  for _, entry in ipairs(self._models) do
    if entry.model == model then return entry end
  end
  error("the model was not prepared by this Accelerator", 3)
end

-- The model's layout; a model this Accelerator did not prepare is whole
-- on this rank (under a mesh, possibly split over tp by the recipe).
local function layout_of(self, model)
  for _, entry in ipairs(self._models) do
    if entry.model == model then return entry end
  end
  return ModelLayout.new(self._parallel, model)
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
  self._parallel:refuse_under_pipeline("join_uneven_inputs")
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
  return layout_of(self, model):with_full_parameters(fn, written)
end

-- The model's parameters and buffers by name, full (gathered at ZeRO stage
-- 3, and over tp) and copied: Accelerate's get_state_dict. Call it on every rank.
function Accelerator:get_state_dict(model)
  if rawget(model, "pipeline") then return self:_pipeline_state_dict(model) end
  return layout_of(self, model):full_state_dict()
end

-- A pipelined model's whole weights on every rank, its stages gathered
-- first under FSDP on each stage, then over tp.
function Accelerator:_pipeline_state_dict(model)
  return self:_with_full_parameters(model, function()
    return pipeline_weights().full_state_dict(model, self._world, self._parallel:tp())
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
  -- LuaJIT's compiled traces keep the objects they were specialised on (a
  -- model's modules and tensors) alive as constants: without the flush, a
  -- freed model could outlive its release until its traces fell.
  jit.flush()
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
  local models = {}
  for i, entry in ipairs(self._models) do models[i] = entry.model end
  return {
    split = SplitCheckpoint.new(self._parallel, self._models),
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
  self._parallel:refuse_under_pipeline_experts("save_state")
  if self._parallel.state_dict_type == "SHARDED_STATE_DICT" then
    self._parallel:refuse_under_experts("save_state with SHARDED_STATE_DICT",
                                        "FULL_STATE_DICT (the default) writes each expert once, by its first holder")
  end
  if dir == nil then self:_check_project_folder("Accelerator:save_state") end
  if options ~= nil then return require("accel.live.async_save").save_state(self, dir, options) end  -- {async = true}
  return checkpointing.save_state(self:_checkpoint_contents(), dir)
end

-- Restores what save_state wrote; without `dir`, the newest complete
-- automatic checkpoint. Returns the folder loaded.
function Accelerator:load_state(dir)
  self._parallel:refuse_under_pipeline_experts("load_state")
  if dir == nil then self:_check_project_folder("Accelerator:load_state") end
  return checkpointing.load_state(self:_checkpoint_contents(), dir)
end

-- Objects with state_dict/load_state_dict to include in checkpoints.
-- Live runs (docs/live-runs.md): named control hooks, the spike guard and
-- asynchronous saves. live/ is loaded on first use, as the modules
-- lua/accel/init.lua lists are (the heap's size sets how much garbage builds
-- up between collections); until an asynchronous save, none is in flight.
function Accelerator:on_control(name, fn) return require("accel.live.control").on_control(self, name, fn) end
function Accelerator:spike_guard(options) return require("accel.live.control").spike_guard(self, options) end
function Accelerator:wait_for_checkpoint()
  if rawget(self, "_checkpoint_pending") then return require("accel.live.async_save").wait_for_checkpoint(self) end
end

function Accelerator:register_for_checkpointing(...)
  checkpointing.register(self._custom_objects, ...)
end

-- Weights for other tools: {safe_serialization = true, max_shard_size = "2GB"}.
-- Full weights also when sharded or split: call it on every rank.
function Accelerator:save_model(model, dir, options)
  if rawget(model, "pipeline") then
    -- The whole model's weights by its names, as one process writes them.
    local full = self:_pipeline_state_dict(model)
    return checkpointing.save_model(self.state, model, dir, options, full, pipeline_weights().ordered(model, full))
  end
  return layout_of(self, model):with_full_weights(function(full, ordered)
    return checkpointing.save_model(self.state, model, dir, options, full, ordered)
  end)
end

-- Full weights, each rank keeping its tp slice and its shards.
function Accelerator:load_model(model, dir, options)
  if rawget(model, "pipeline") then
    -- Under FSDP on each stage the shards take what was written.
    return self:_with_full_parameters(model, function()
      return checkpointing.load_model(model, dir, options, function(weights, path)
        return pipeline_weights().stage_state(model, weights, path, self._parallel:tp())
      end)
    end, true)
  end
  layout_of(self, model):load_full_weights(function(fit)
    checkpointing.load_model(model, dir, options, fit)
  end)
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
