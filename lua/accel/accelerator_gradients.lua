-- The Accelerator's gradient methods, which accelerator.lua installs on it:
-- backward with synchronisation across ranks, fp16 unscaling, clipping
-- (over the shards' slices at ZeRO stages 2 and 3), and the switches of
-- gradient accumulation (accumulate, no_sync, trigger_sync_in_backward).
-- They act on the Accelerator's prepared models (self._models, each a
-- ModelLayout, parallel/model_layout.lua, whose sync is the model's
-- gradient synchronisation, a data-parallel reducer or the sharded model,
-- driven alike: engine/parallel/gradient_sync.h) and its GradientState;
-- `entry_of(self, model)` finds a model's layout or raises at the recipe's
-- line.
local args_error = require("accel.util.args").error
local host_action = require("accel.host_action")

-- Loaded for a pipeline only (the heap: lua/accel/init.lua).
local function pipelined_loss() return require("accel.parallel.pipeline.pipelined_loss") end

return function(Accelerator, entry_of)

  -- Runs autograd from `loss`, scaled for accumulation and fp16. On a step that
  -- synchronises, gradients are reduced across ranks during backward. With
  -- {num_items = n}, loss is a mean over n items and gradients become the
  -- mean over all items of all micro-steps and ranks since the last sync.
  function Accelerator:backward(loss, options)
    -- A pipelined model's out.loss (parallel/pipeline/pipelined_loss.lua)
    -- stands for a schedule, which runs here.
    local pipelined = rawget(self, "_pipelined") and pipelined_loss().is_pending(loss)
    if rawget(self, "_pipelined") and not pipelined then pipelined_loss().check_plain(loss) end
    if self._live then self._live:saw_backward(loss, options) end
    local num_items = options and options.num_items
    if num_items then self.gradient_state:_add_items(num_items) end
    local accumulating = self.gradient_accumulation_steps > 1
    local scaler = self.gradient_state.scaler
    local function scaled(l)
      if num_items then
        l = l * num_items
      elseif accumulating then
        l = l / self.gradient_accumulation_steps
      end
      if scaler then l = l * scaler:scale() end
      return l
    end
    -- Off sync steps, sync_each_batch and trigger_sync_in_backward still
    -- all-reduce: the reducer sums the accumulated gradients over ranks, so
    -- dividing by the number of ranks keeps them equal on every rank and the
    -- final sync step's sum over ranks right.
    -- ZeRO stages 2 and 3 reduce on every backward (sharded_model.h).
    local early = {}
    for _, entry in ipairs(self._models) do
      local sync = self.sync_gradients and not entry.no_sync
      local reduces_always = entry:reduces_every_backward()
      if not sync and not reduces_always
         and (entry.sync_next_backward or (self.sync_each_batch and not entry.no_sync)) then
        sync = true
        early[#early + 1] = entry
      end
      entry.sync:set_sync(sync)
      entry.sync:caller_finishes_backward()
      entry.sync_next_backward = nil
    end
    if pipelined then
      pipelined_loss().backward(loss, scaled)  -- each micro-batch's backward on scaled(its loss)
    else
      scaled(loss):backward()
    end
    for _, entry in ipairs(self._models) do entry.sync:end_backward() end
    for _, entry in ipairs(early) do entry.sync:finalize() end
    if self.sync_gradients then self:_finish_sync() end
    -- A recipe's own loss:backward() on a prepared model synchronises as
    -- DDP's does, outside no_sync (engine/parallel/gradient_sync.h).
    for _, entry in ipairs(self._models) do entry.sync:set_sync(not entry.no_sync) end
  end

  -- The synchronisations divide by the items of all ranks (or the number of ranks).
  -- Inside a CUDA graph's capture the count is kept for each replay
  -- (cuda_graphs.lua): a count of items would be one step's only.
  function Accelerator:_finish_sync()
    local state = self.gradient_state
    local capture = state._capture
    if capture and state.items > 0 then
      args_error("cuda_graphs: backward's num_items is one step's count and cannot be captured")
    end
    local items = host_action(state, function() return state:_finish_sync() end) or 0
    for _, entry in ipairs(self._models) do
      if not entry.no_sync then
        entry.sync:finalize(items)
        if entry.after_sync then entry.after_sync() end
      end
    end
  end

  -- With fp16, divides the gradients by the loss scale once per synchronised
  -- step (before clipping or stepping) and notes whether any overflowed.
  function Accelerator:unscale_gradients()
    self.gradient_state:_unscale()
  end

  -- The current fp16 loss scale (nil without fp16).
  function Accelerator:loss_scale()
    local scaler = self.gradient_state.scaler
    return scaler and scaler:scale()
  end

  -- Clipping acts on synchronised steps only (on other micro-steps the
  -- gradients are partial sums); it returns nil there.
  function Accelerator:clip_grad_norm(params, max_norm, norm_type)
    if not self.sync_gradients then return nil end
    self:unscale_gradients()
    -- Over the shards' slices at ZeRO stages 2 and 3, over the prepared
    -- models' under tensor parallelism (parallel/parallel_dims.lua).
    return self._parallel:clip_grad_norm(self._models, params, max_norm, norm_type)
  end

  function Accelerator:clip_grad_value(params, value)
    if not self.sync_gradients then return end
    self:unscale_gradients()
    self._parallel:clip_grad_value(self._models, params, value)
  end

  -- Runs fn as one micro-step of gradient accumulation: gradients synchronise
  -- (and the prepared optimizer steps) every gradient_accumulation_steps
  -- calls, and at the last batch of a prepared data loader.
  function Accelerator:accumulate(model, fn)
    entry_of(self, model)
    local state = self.gradient_state
    host_action(state, function() state:_begin_micro_step() end)
    return fn()
  end

  -- Runs fn with gradient synchronisation off for this model, also for a
  -- plain loss:backward() inside fn (as DDP's no_sync).
  function Accelerator:no_sync(model, fn)
    local entry = entry_of(self, model)
    local previous = entry.no_sync
    entry.no_sync = true
    entry.sync:set_sync(false)
    local results = { pcall(fn) }
    entry.no_sync = previous
    entry.sync:set_sync(not previous)
    if not results[1] then error(results[2], 0) end
    return unpack(results, 2, table.maxn(results))
  end

  -- The next backward synchronises this model's gradients even on a
  -- micro-step that would not (inside no_sync or accumulate), as Accelerate's.
  -- With fn (Accelerate's context manager), the trigger holds while fn runs:
  -- its backward synchronises, and none after it is forced.
  function Accelerator:trigger_sync_in_backward(model, fn)
    local entry = entry_of(self, model)
    entry.sync_next_backward = true
    if fn == nil then return end
    local results = { pcall(fn) }
    entry.sync_next_backward = nil
    if not results[1] then error(results[2], 0) end
    return unpack(results, 2, table.maxn(results))
  end

end
