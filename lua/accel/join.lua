-- acc:join_uneven_inputs(models, fn, {even_batches = ...}): runs fn (a
-- training loop) on ranks that may have different numbers of batches, as
-- DDP's Join does under Accelerate's join_uneven_inputs.
--
-- Inside fn, every forward of a joined model that a synchronising backward
-- will follow (grad enabled, training, a step that synchronises, outside
-- no_sync) first all-reduces a small "active" flag, as DDP's join hook does
-- in DDP's forward: so a recipe's own loss:backward() is joined as well as
-- acc:backward(). A rank whose fn has returned enters a join loop: it takes
-- part in that flag's all-reduce, and while some rank is still active it
-- shadows the step's gradient all-reduces with zero gradients (it runs
-- backward of `sum(parameters) * 0`, so the reducer's hooks fire for every
-- parameter in the same order as on the active ranks). Gradients are
-- divided by the initial world size, as DDP's Join does by default (with
-- backward{num_items}, by the active ranks' items). When every rank has
-- finished, the parameters and buffers of the rank that ran the most
-- synchronising steps (the last to join) are broadcast to all, so the
-- models agree; the joined ranks' optimizers did not step.
--
-- Only the gradient all-reduces are shadowed: other collectives inside fn
-- (gather, reduce, check_trigger, ...) must be called as often on every
-- rank. As in Accelerate, the join is enabled only when batches are uneven
-- (even_batches false, given or the Accelerator's); `even_batches` given
-- here overrides the prepared map-style loaders' value while fn runs.
-- Under sharding (zero_stage, fsdp_plugin) only even batches are accepted.
local core = require("accel.core")
local logging = require("accel.logging")

local dist = core.dist

local Join = {}
Join.__index = Join

-- An active rank's step that synchronises is under way.
function Join:notify()
  local flag = core.tensor({ 1 }, { dtype = "float32" })
  dist.all_reduce(flag, "sum")
  self.steps = self.steps + 1
end

-- This rank's fn has returned: shadow the others' steps until all are done.
function Join:shadow()
  local acc = self.acc
  while true do
    local flag = core.tensor({ 0 }, { dtype = "float32" })
    dist.all_reduce(flag, "sum")
    if flag:item() == 0 then return end
    local zero
    for _, entry in ipairs(acc._models) do
      entry.sync:set_sync(true)
      entry.sync:caller_finishes_backward()
      for _, p in ipairs(entry.model:parameters()) do
        if p.grad then p.grad:zero_() end
        zero = zero and zero + p:sum() * 0 or p:sum() * 0
      end
    end
    if zero then zero:backward() end
    for _, entry in ipairs(acc._models) do entry.sync:end_backward() end
    -- No items of its own: the active ranks' items divide the sum.
    for _, entry in ipairs(acc._models) do entry.sync:finalize(0) end
  end
end

-- The models of the rank that ran the most synchronising steps, on all ranks.
function Join:sync_final_models()
  local steps = self.acc:gather(core.tensor({ self.steps }, { dtype = "int64" })):totable()
  local last = 1
  for r = 2, #steps do
    if steps[r] > steps[last] then last = r end
  end
  core.no_grad(function()
    for _, entry in ipairs(self.acc._models) do
      for _, p in ipairs(entry.model:parameters()) do dist.broadcast(p, last - 1) end
      for _, b in ipairs(entry.model:buffers()) do dist.broadcast(b, last - 1) end
    end
  end)
end

-- Puts the notification in front of each joined model's forward; returns
-- what to restore (each model's own forward field, nil for its class's).
local function hook_forwards(join, acc, models)
  local saved = {}
  for i, model in ipairs(models) do
    local entry
    for _, e in ipairs(acc._models) do
      if e.model == model then entry = e end
    end
    local forward = model.forward
    saved[i] = { model, rawget(model, "forward") }
    rawset(model, "forward", function(m, ...)
      if core.is_grad_enabled() and m.training and acc.sync_gradients and not entry.no_sync then join:notify() end
      return forward(m, ...)
    end)
  end
  return saved
end

local function check_arguments(acc, models, fn, options)
  if type(models) ~= "table" then
    error("Accelerator:join_uneven_inputs: models must be a list of prepared models, got a " .. type(models), 3)
  end
  for i, model in ipairs(models) do
    local prepared = false
    for _, entry in ipairs(acc._models) do prepared = prepared or entry.model == model end
    if not prepared then
      error(string.format("Accelerator:join_uneven_inputs: models[%d] was not prepared by this Accelerator", i), 3)
    end
  end
  if type(fn) ~= "function" then
    error("Accelerator:join_uneven_inputs: fn must be a function, got a " .. type(fn), 3)
  end
  for key, value in pairs(options) do
    if key ~= "even_batches" then
      error("Accelerator:join_uneven_inputs: unknown option '" .. tostring(key) .. "' (known: even_batches)", 3)
    end
    if type(value) ~= "boolean" then
      error("Accelerator:join_uneven_inputs: even_batches must be a boolean, got a " .. type(value), 3)
    end
  end
end

-- Sets even_batches of the prepared loaders that can change it; returns
-- what to restore.
local function override_even_batches(acc, even_batches)
  local restore, log = {}, logging.get_logger("accel")
  for _, loader in ipairs(acc._dataloaders) do
    if loader.kind == "iterable" or loader.dispatch_batches then
      log:warning("join_uneven_inputs: even_batches is only overridden for map-style loaders read by each "
                  .. "rank; a loader of an iterable data set or with dispatch_batches keeps its value")
    else
      if loader.split_batches then
        log:warning("join_uneven_inputs: overriding even_batches of a loader with split_batches")
      end
      restore[#restore + 1] = { loader, loader.even_batches }
      loader.even_batches = even_batches
    end
  end
  return restore
end

-- Accelerator:join_uneven_inputs tail-calls this function, so its caller
-- (error level 2; 3 from check_arguments) is the recipe.
return function(acc, models, fn, options)
  options = options or {}
  check_arguments(acc, models, fn, options)
  if acc.num_processes == 1 then return fn() end
  local even_batches = options.even_batches
  if even_batches == nil then even_batches = acc.even_batches end
  if acc.sharding and not even_batches then
    -- Under sharding every rank owns a shard that only its own optimizer
    -- step updates, and the step itself gathers the shards: a rank that
    -- stopped early would leave its shard stale and the others waiting.
    -- Accelerate's join_uneven_inputs has no effect under DeepSpeed or FSDP
    -- (a warning, then uneven batches hang); here the choice is made up front.
    error(string.format("Accelerator:join_uneven_inputs: uneven batches (even_batches = false) cannot be joined "
                        .. "under sharding (%s, stage %d): every rank must take every optimizer step to update "
                        .. "its shard; keep even_batches = true, which repeats samples to even out the last batch",
                        acc.sharding.name, acc.sharding.stage), 2)
  end
  local restore = options.even_batches ~= nil and override_even_batches(acc, options.even_batches) or {}
  local join = not even_batches and setmetatable({ acc = acc, steps = 0 }, Join) or nil
  local forwards = join and hook_forwards(join, acc, models) or {}
  local results = { pcall(fn) }
  for _, saved in ipairs(forwards) do rawset(saved[1], "forward", saved[2]) end
  for _, saved in ipairs(restore) do saved[1].even_batches = saved[2] end
  if not results[1] then error(results[2], 0) end
  if join then
    join:shadow()
    join:sync_final_models()
  end
  return unpack(results, 2, table.maxn(results))
end
