-- Checkpoints of a pipeline, each run a fresh launch, for
-- tests/launch/test_pipeline_checkpoint.sh (tests/lua/helpers/
-- mesh_checkpoint_check.lua's small Llama, data, AdamW with weight decay,
-- cosine schedule with warmup, clipping and shuffled loader, its loss the
-- causal LM's of the rows):
--
--   accel-run pipeline_checkpoint.lua --nproc N -- save DIR MESH
--     MESH: 0 (one process, no mesh) or sizes pp=P[,dp=D][,shard=S][,v=V]:
--     pp_size P x dp_replicate_size D x dp_shard_size S (FSDP on each
--     stage), one micro-batch a row, 1F1B, or with V > 1
--     Interleaved1F1B of V virtual stages (another cut); or without pp
--     tp=T[,shard=S] or shard=S (no pipeline: tensor_parallel over a mesh
--     of tp T, FSDP over dp_shard S). 10 updates, their losses and final
--     weights one process's within 1e-5, save_state(DIR/checkpoint) and
--     save_model(DIR/saved) after the 5th; then DIR/after (save_model of
--     the final weights: the whole model's names) and DIR/losses.lua
--   accel-run pipeline_checkpoint.lua --nproc N -- resume DIR MESH TOL
--     a run on MESH built from other weights (seed 9): load_state(DIR/checkpoint),
--     its full weights (get_state_dict) against DIR/saved's within 1e-6, the
--     5 updates left, their losses and final weights (get_state_dict)
--     against DIR's within TOL
local here = arg[0]:match("(.*/)")
local check = dofile(here .. "../lua/helpers/check.lua")
local mc = dofile(here .. "../lua/helpers/mesh_checkpoint_check.lua")
local serialize = require("accel.serialize")
local core = require("accel.core")
local ck = core.formats

local mode, dir, spec = arg[1], arg[2], arg[3]
local ROWS, MAX_NORM = 4, 0.5

local function sizes()
  local o = {}
  if spec == "0" then return o end
  for key, size in spec:gmatch("([%w_]+)=(%d+)") do
    if key ~= "pp" and key ~= "dp" and key ~= "shard" and key ~= "v" and key ~= "tp" then
      error("pipeline_checkpoint.lua: unknown size " .. key .. " (pp, dp, shard, v, tp)")
    end
    o[key] = tonumber(size)
  end
  return o
end

-- {acc, model, opt, sched, loader} on MESH, the model built from `seed`.
local function setup(seed)
  local o = sizes()
  local options = {}
  local dp = (o.dp or 1) * (o.shard or 1)
  if o.pp then
    options.parallelism_config = accel.ParallelismConfig{ pp_size = o.pp, dp_replicate_size = o.dp,
      dp_shard_size = o.shard, pp_schedule = o.v and o.v > 1 and "Interleaved1F1B" or "1F1B",
      pp_virtual_stages = o.v, pp_microbatches = ROWS / dp }
  end
  if not o.pp and (o.tp or o.shard) then
    options.parallelism_config = accel.ParallelismConfig{ tp_size = o.tp, dp_shard_size = o.shard }
  end
  local acc = accel.Accelerator(options)
  local model = mc.build(seed)
  if o.tp then model = accel.parallel.tensor_parallel(model, acc.mesh) end
  local opt = accel.optim.AdamW(model:parameters(), { lr = 1e-2, weight_decay = 0.01 })
  local sched = accel.optim.lr_scheduler.cosine(opt, { warmup = 2, total = mc.STEPS })
  local loader = accel.data.DataLoader(accel.data.TensorDataset(mc.data()), { batch_size = ROWS / dp,
                                                                              shuffle = true })
  model, opt, loader, sched = acc:prepare(model, opt, loader, sched)
  return { acc = acc, model = model, opt = opt, sched = sched, loader = loader }
end

-- Up to `steps` updates from the loader's position; after update u runs
-- hooks[u]. Returns the losses (averaged over dp).
local function train(run, steps, hooks)
  local losses = {}
  for rows in run.loader:iter() do
    local out = run.model{ input_ids = rows, labels = rows }
    run.acc:backward(out.loss)
    run.acc:clip_grad_norm(run.model:parameters(), MAX_NORM)
    run.opt:step()
    run.sched:step()
    run.opt:zero_grad()
    local loss = out.loss:detach():clone():view(1)
    if run.acc.mesh then run.acc.mesh.dp:all_reduce(loss, "mean") end
    losses[#losses + 1] = loss:item()
    if hooks and hooks[#losses] then hooks[#losses]() end
    if #losses == steps then break end
  end
  return losses
end

-- The same 10 updates in one process without an Accelerator.
local function reference()
  local model = mc.build(1)
  local opt = accel.optim.AdamW(model:parameters(), { lr = 1e-2, weight_decay = 0.01 })
  local sched = accel.optim.lr_scheduler.cosine(opt, { warmup = 2, total = mc.STEPS })
  local loader = accel.data.DataLoader(accel.data.TensorDataset(mc.data()), { batch_size = ROWS, shuffle = true })
  local losses = {}
  for rows in loader:iter() do
    local loss = model{ input_ids = rows, labels = rows }.loss
    loss:backward()
    core.clip_grad_norm(model:parameters(), MAX_NORM)
    opt:step()
    sched:step()
    opt:zero_grad()
    losses[#losses + 1] = loss:item()
  end
  return losses, model:state_dict()
end

if mode == "save" then
  local run = setup(1)
  local losses = train(run, mc.STEPS, { [5] = function()
    run.acc:save_state(dir .. "/checkpoint")
    run.acc:save_model(run.model, dir .. "/saved")
  end })
  run.acc:save_model(run.model, dir .. "/after")
  local reference_losses, reference_state = reference()
  check.near(losses, reference_losses, 1e-5, spec .. ": the saving run's losses against one process's")
  mc.same_state(check, ck.load_weights(dir .. "/after"), reference_state, 1e-5,
                spec .. ": the saving run's final weights (save_model) against one process's")
  if run.acc.is_main_process then
    local f = assert(io.open(dir .. "/losses.lua", "wb"))
    f:write(serialize.dump(losses))
    f:close()
  end
  run.acc:print(string.format("pipeline checkpoint save: %s", spec))
elseif mode == "resume" then
  local tol = tonumber(arg[4])
  local run = setup(9)
  run.acc:load_state(dir .. "/checkpoint")
  mc.same_state(check, run.acc:get_state_dict(run.model), ck.load_weights(dir .. "/saved"), 1e-6,
                "the weights loaded (get_state_dict) against the saving run's at the save (save_model)")
  local rest = train(run, mc.STEPS)
  local f = assert(io.open(dir .. "/losses.lua", "rb"))
  local losses = serialize.load(f:read("*a"), dir .. "/losses.lua")
  f:close()
  check.equal(#rest, 5, "updates left in the epoch")
  for i = 1, 5 do check.near(rest[i], losses[5 + i], tol, "resumed loss " .. (5 + i)) end
  local largest = mc.same_state(check, run.acc:get_state_dict(run.model), ck.load_weights(dir .. "/after"), tol,
                                "the resumed run's weights")
  run.acc:print(string.format("pipeline checkpoint resume: %s, losses and weights within %g (largest difference %g)",
                              spec, tol, largest))
else
  error("pipeline_checkpoint.lua: mode must be save or resume, got " .. tostring(mode))
end
