-- The Accelerator's preparation methods, which accelerator.lua installs on
-- it: prepare (models, optimizers, data loaders and schedulers, in any
-- order), prepare_model (the parallelisms applied by the Accelerator's
-- ParallelDims, parallel/parallel_dims.lua, then fp8 and autocast),
-- build_model and the other prepare_* methods. Returns convert_results,
-- which turns autocast's half-precision results back into float32.
local core = require("accel.core")
local Module = require("accel.nn.module")
local DataLoader = require("accel.data.dataloader")
local AcceleratedOptimizer = require("accel.accelerated_optimizer")
local AcceleratedScheduler = require("accel.accelerated_scheduler")
local tensor_tree = require("accel.util.tensor_tree")
local init_empty_weights = require("accel.big_modeling.init_empty_weights")
local float8 = require("accel.float8")
local args_error = require("accel.util.args").error

local dist = core.dist

return function(Accelerator)

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

  -- Where the gradients are, over every prepared model (model_layout.lua).
  local function gradient_holders(self)
    local out = {}
    for _, layout in ipairs(self._models) do
      for _, p in ipairs(layout:gradient_holders()) do out[#out + 1] = p end
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
  -- needed when the Accelerator shards: it is pointed at the shards. The
  -- Accelerator's ParallelDims applies the parallelisms.
  function Accelerator:prepare_model(model, optimizer)
    if self.mixed_precision == "fp8" and self._parallel:pp() then
      args_error("Accelerator:prepare: mixed_precision = \"fp8\" under pp_size > 1 is not implemented yet "
                 .. "(docs/api/parallelism.md); bf16 and fp16 are")
    end
    local entry = self._parallel:prepare(model, optimizer)
    -- Ranks holding different parts of the gradients skip an fp16 step
    -- together when one rank's overflowed.
    if entry:splits_gradients() then
      self.gradient_state._agree_overflow = function(found_inf) return overflow_anywhere(self, found_inf) end
    end
    self._models[#self._models + 1] = entry
    self.gradient_state:_set_parameters(gradient_holders(self))
    if entry.pipelined then
      -- A pipelined model (parallel/pipeline/pipelined_model.lua) defers
      -- its forward: its stages run under autocast when the schedule runs.
      rawset(self, "_pipelined", true)
      local dtype = self:_autocast_dtype()
      if dtype then
        entry.model:_set_autocast(function(fn) return core.amp.autocast(fn, dtype, self.device) end)
      end
      return entry.model
    end
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
  -- does under Accelerate. Under pp_size > 1 every rank builds the model
  -- empty and reads only its stages' weights from the checkpoint
  -- from_pretrained names (parallel/pipeline/stage_loading.lua; under
  -- tp_size > 1 when tensor_parallel splits it, its tp slices), and the
  -- model is returned. Otherwise every rank runs fn as is. Returns what fn
  -- returns.
  function Accelerator:build_model(fn)
    if type(fn) ~= "function" then
      args_error("Accelerator:build_model: expected a function that builds the model, got a " .. type(fn))
    end
    if self._parallel:pp() then
      return require("accel.parallel.pipeline.stage_loading").build(fn, self._parallel.mesh)
    end
    if self._parallel:builds_empty() and not self.is_main_process then
      return init_empty_weights(fn)
    end
    return fn()
  end

  function Accelerator:prepare_data_loader(loader)
    loader.device = self.device
    -- Under a mesh the ranks of one dp group share their data (tp ranks see the same batches).
    local rank, size = self._parallel:data_parallel()
    loader:shard(rank, size, {
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
    prepared.live = require("accel.live.control").controller(self)  -- loaded with the first optimizer
    for _, entry in ipairs(self._models) do
      local hooks = entry:optimizer_hooks(optimizer)
      if hooks then prepared:_add_hooks(hooks) end
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

  return convert_results
end
