-- nproc: 2 3
-- Port of Accelerate's test_utils/scripts/test_sync.py: no_sync,
-- accumulate (with split_batches, dispatch_batches and sync_each_batch),
-- trigger_sync_in_backward and the gradient state across nested loaders,
-- each checked against a plain model trained on the gathered batches.
-- Run at 2 and 3 ranks (tests/CMakeLists.txt).
local dir = arg[0]:match("(.*/)")
local check = dofile(dir .. "helpers/check.lua")
local F, optim, data = accel.nn.functional, accel.optim, accel.data
local training = dofile(dir .. "helpers/accelerate_training.lua")
local sections = dofile(dir .. "helpers/accelerate_sections.lua")(check, "test_accelerate_sync")
local allclose = training.allclose

-- Every parameter's gradient in sync (or not) between the two models.
local function check_model_parameters(model_a, model_b, did_step, iteration, rtol)
  local params_b = model_b:parameters()
  for i, p in ipairs(model_a:parameters()) do
    if did_step then
      check.truthy(allclose(p.grad, params_b[i].grad, rtol or 1e-5),
                   string.format("gradients in sync at iteration %d: %s vs %s", iteration,
                                 tostring(p.grad:item()), tostring(params_b[i].grad:item())))
    else
      check.truthy(not allclose(p.grad, params_b[i].grad),
                   string.format("gradients not in sync at iteration %d: %s vs %s", iteration,
                                 tostring(p.grad:item()), tostring(params_b[i].grad:item())))
    end
  end
end

local function step_model(model, input, target, acc, do_backward)
  model:train()
  local loss = F.mse_loss(model(input), target)
  if do_backward == false then
    (loss / acc.gradient_accumulation_steps):backward()
  else
    acc:backward(loss)
  end
end

-- split_batches needs a batch that every rank can split.
local function get_training_setup(acc, sched)
  accel.set_seed(42)
  local model = training.RegressionModel()
  local ddp_model = training.RegressionModel()
  local dset = training.RegressionDataset{ length = 80 }
  local dataloader = data.DataLoader(dset, { batch_size = training.divisible_batch_size(16, acc.num_processes) })
  if not sched then
    ddp_model, dataloader = acc:prepare(ddp_model, dataloader)
    return model, ddp_model, dataloader
  end
  local opt = optim.AdamW(model:parameters(), { lr = 1e-3 })
  local ddp_opt = optim.AdamW(ddp_model:parameters(), { lr = 1e-3 })
  local lambda = function(epoch) return epoch ^ 0.65 end
  local base_sched = optim.lr_scheduler.lambda(opt, lambda)
  local ddp_sched = optim.lr_scheduler.lambda(ddp_opt, lambda)
  ddp_model, ddp_opt, ddp_sched, dataloader = acc:prepare(ddp_model, ddp_opt, ddp_sched, dataloader)
  return model, opt, base_sched, dataloader, ddp_model, ddp_opt, ddp_sched
end

local function first_batch(loader)
  local iterator = loader:iter()
  local batch = iterator()
  return batch.x, batch.y
end

local function shuffled(t, iteration)
  accel.manual_seed(1337 + iteration)
  return t:index_select(1, accel.randperm(t:size(1)))
end

local acc = accel.Accelerator{}

sections.run("dataloader_break", function()
  local state = accel.Accelerator{}
  local first = data.DataLoader(training.RegressionDataset{ length = 80 }, { batch_size = 16 })
  local second = data.DataLoader(training.RegressionDataset{ length = 96 }, { batch_size = 16 })
  first, second = state:prepare(first, second)
  local gs = state.gradient_state
  check.equal(gs.active_dataloader, nil, "no active loader before the loop")
  local iteration = 0
  for _ in first:iter() do
    check.truthy(gs.active_dataloader == first, "the outer loader is active at batch " .. iteration)
    if iteration < first:num_batches() - 1 then
      check.equal(gs.end_of_dataloader, false, "not the outer loader's end at batch " .. iteration)
      if iteration == 1 then
        local batch_num = 0
        for _ in second:iter() do
          check.truthy(gs.active_dataloader == second, "the inner loader is active")
          check.equal(gs.end_of_dataloader, batch_num == second:num_batches() - 1,
                      "inner end_of_dataloader at batch " .. batch_num)
          batch_num = batch_num + 1
        end
      end
    else
      check.equal(gs.end_of_dataloader, true, "the outer loader's last batch")
    end
    iteration = iteration + 1
  end
  check.equal(gs.active_dataloader, nil, "no active loader after the loop")
end)

-- Three steps, the even ones under no_sync; `in_sync(iteration)` says
-- whether the gradients then equal the single-process model's.
local function sync_steps(in_sync)
  local model, ddp_model, dataloader = get_training_setup(acc)
  local ddp_input, ddp_target = first_batch(dataloader)
  for iteration = 0, 2 do
    local gathered = acc:gather({ ddp_input, ddp_target })
    step_model(model, gathered[1], gathered[2], acc)
    if iteration % 2 == 0 then
      acc:no_sync(ddp_model, function() step_model(ddp_model, ddp_input, ddp_target, acc) end)
    else
      step_model(ddp_model, ddp_input, ddp_target, acc)
    end
    check_model_parameters(model, ddp_model, in_sync(iteration), iteration)
    ddp_input = shuffled(ddp_input, iteration)
  end
end

sections.run("noop_sync", function() sync_steps(function() return true end) end,
             { unless = acc.num_processes > 1 and "no_sync is a no-op only on one process" or nil })
sections.run("distributed_sync", function()
  sync_steps(function(iteration) return iteration % 2 ~= 0 end)
end)

sections.run("distributed_sync_multiple_fwd", function()
  local model, ddp_model, dataloader = get_training_setup(acc)
  local losses, num_iterations = {}, 3
  for i = 1, num_iterations do
    local ddp_input, ddp_target = first_batch(dataloader)
    local gathered = acc:gather({ ddp_input, ddp_target })
    step_model(model, gathered[1], gathered[2], acc)
    acc:no_sync(ddp_model, function()
      losses[i] = F.mse_loss(ddp_model(ddp_input), ddp_target)
    end)
  end
  -- A forward run under no_sync does not synchronise in its backward, as
  -- DDP's; trigger_sync_in_backward makes the last one synchronise.
  for i = 1, num_iterations do
    if i < num_iterations then
      acc:backward(losses[i])
      check_model_parameters(model, ddp_model, false, i)
    else
      acc:trigger_sync_in_backward(ddp_model, function() acc:backward(losses[i]) end)
      check_model_parameters(model, ddp_model, true, i)
    end
  end
end)

local function plugin_accelerator(split_batches, dispatch_batches, sync_each_batch)
  return accel.Accelerator{
    split_batches = split_batches,
    dispatch_batches = dispatch_batches or nil,  -- false is the default
    gradient_accumulation_plugin = accel.GradientAccumulationPlugin{ num_steps = 2,
                                                                     sync_each_batch = sync_each_batch },
  }
end

local function combination_name(prefix, split_batches, dispatch_batches, sync_each_batch)
  return string.format("%s:split_batches=%s:dispatch_batches=%s:sync_each_batch=%s", prefix,
                       tostring(split_batches), tostring(dispatch_batches), tostring(sync_each_batch))
end

local function test_gradient_accumulation(split_batches, dispatch_batches, sync_each_batch)
  local accelerator = plugin_accelerator(split_batches, dispatch_batches, sync_each_batch)
  local model, ddp_model, dataloader = get_training_setup(accelerator)
  local iteration, last = 0, dataloader:num_batches() - 1
  for batch in dataloader:iter() do
    local ddp_input, ddp_target = batch.x, batch.y
    local gathered = accelerator:gather({ ddp_input, ddp_target })
    step_model(model, gathered[1], gathered[2], accelerator, false)
    accelerator:accumulate(ddp_model, function()
      step_model(ddp_model, ddp_input, ddp_target, accelerator)
    end)
    local in_sync = (iteration + 1) % 2 == 0 or iteration == last or sync_each_batch
    check_model_parameters(model, ddp_model, in_sync, iteration)
    iteration = iteration + 1
  end
  check.equal(iteration, last + 1, "batches read")
end

-- Accelerate's scheduler steps num_processes times per update; accel's
-- advances once per optimizer update whatever the number of ranks (see
-- docs/coming-from-accelerate.md), so the plain model's scheduler steps once.
local function test_gradient_accumulation_with_opt_and_scheduler(split_batches, dispatch_batches, sync_each_batch)
  local accelerator = plugin_accelerator(split_batches, dispatch_batches, sync_each_batch)
  local model, opt, sched, dataloader, ddp_model, ddp_opt, ddp_sched = get_training_setup(accelerator, true)
  local iteration, count = 0, dataloader:num_batches()
  for batch in dataloader:iter() do
    local ddp_input, ddp_target = batch.x, batch.y
    local gathered = accelerator:gather({ ddp_input, ddp_target })
    model:train()
    ddp_model:train()
    step_model(model, gathered[1], gathered[2], accelerator, false)
    opt:step()
    local did_step = (iteration + 1) % 2 == 0 or iteration + 1 == count
    if did_step then sched:step() end
    accelerator:accumulate(ddp_model, function()
      step_model(ddp_model, ddp_input, ddp_target, accelerator)
      ddp_opt:step()
      ddp_sched:step()
    end)
    check.near(ddp_opt:option("lr"), opt:option("lr"), 1e-12, "learning rates at iteration " .. iteration)
    if accelerator.num_processes > 1 then
      check_model_parameters(model, ddp_model, did_step or sync_each_batch, iteration, 1e-2)
    end
    if did_step then opt:zero_grad() end
    ddp_opt:zero_grad()
    iteration = iteration + 1
  end
end

for _, split_batches in ipairs({ true, false }) do
  for _, dispatch_batches in ipairs({ true, false }) do
    for _, sync_each_batch in ipairs({ true, false }) do
      sections.run(combination_name("gradient_accumulation", split_batches, dispatch_batches, sync_each_batch),
                   function() test_gradient_accumulation(split_batches, dispatch_batches, sync_each_batch) end)
    end
  end
end
for _, split_batches in ipairs({ false, true }) do
  for _, dispatch_batches in ipairs({ false, true }) do
    for _, sync_each_batch in ipairs({ false, true }) do
      sections.run(combination_name("gradient_accumulation_with_opt_and_scheduler", split_batches,
                                    dispatch_batches, sync_each_batch),
                   function()
                     test_gradient_accumulation_with_opt_and_scheduler(split_batches, dispatch_batches,
                                                                       sync_each_batch)
                   end)
    end
  end
end

sections.finish()
