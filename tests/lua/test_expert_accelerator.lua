-- nproc: 2 4
-- Expert parallelism through the Accelerator: a tiny Mixtral whose experts
-- the recipe split with accel.parallel.expert_parallel(model, acc.mesh),
-- prepared under ParallelismConfig{dp_shard_size, ep_size = 2 [,
-- dp_replicate_size]}: the other weights FSDP over dp_shard, the experts
-- split over ep and their gradients summed over the ranks holding the same
-- experts; under EP 2 x FSDP 4 the experts FSDP-sharded too, over the 2
-- ranks of dp_shard holding the same ones (each keeps half their
-- elements), elsewhere (dp_shard x cp = ep) whole. EP 2 (2 ranks), EP 2 x
-- FSDP 4, EP 2 x HSDP 2 x 2 and EP 2 x TP 2 (FSDP 2; each expert split
-- over tp too, Mixtral's tp_plan) (4 ranks), with accumulation: 10 AdamW
-- steps with clipping (which acts) give one
-- process's losses, gradient norms and weights within 1e-5 (float32), the
-- full weights gathered from every rank's experts (get_state_dict),
-- save_model written as one process's and load_model taking them back;
-- what is not built under ep refused naming the sizes (checkpoints of
-- training state: test_expert_checkpoint.lua).
local here = arg[0]:match("(.*/)")
local check = dofile(here .. "helpers/check.lua")
local expert_check = dofile(here .. "helpers/expert_check.lua")
local core = require("accel.core")

local tiny, batch, ROWS = expert_check.tiny, expert_check.batch, expert_check.ROWS
local STEPS, MAX_NORM, LR = 10, 0.5, 1e-2
local function adamw(model) return accel.optim.AdamW(model:parameters(), { lr = LR, weight_decay = 0.01 }) end

-- One process on the whole batches.
local reference = { model = tiny(), losses = {}, norms = {} }
do
  local opt = adamw(reference.model)
  for step = 1, STEPS do
    local x = batch(step)
    local loss = reference.model{ input_ids = x, labels = x }.loss
    loss:backward()
    reference.norms[step] = core.clip_grad_norm(reference.model:parameters(), MAX_NORM):item()
    check.truthy(step > 1 or reference.norms[1] > MAX_NORM, "the reference's first norm exceeds max_norm")
    opt:step()
    opt:zero_grad()
    reference.losses[step] = loss:item()
  end
end

local function compare_weights(state, what)
  local compared = 0
  for name, p in reference.model:named_parameters() do
    check.truthy(state[name] ~= nil, what .. ": " .. name .. " in the full weights")
    check.near(state[name], p, 1e-5, what .. ": " .. name)
    compared = compared + 1
  end
  local count = 0
  for _ in pairs(state) do count = count + 1 end
  check.equal(count, compared, what .. ": the full weights hold the whole model's names, no more")
end

local function train(run)
  local accumulation = run.accumulation or 1
  local config = accel.ParallelismConfig{ dp_shard_size = run.dp_shard, dp_replicate_size = run.dp_replicate,
                                          tp_size = run.tp, ep_size = 2 }
  local what = string.format("%s, accumulation %d%s", tostring(config), accumulation,
                             run.mixed_precision and (", " .. run.mixed_precision) or "")
  local acc = accel.Accelerator{ parallelism_config = config, gradient_accumulation_steps = accumulation,
                                 mixed_precision = run.mixed_precision }
  local mesh = acc.mesh
  local model = tiny()
  -- Under tp each expert is split over it too (Mixtral's tp_plan), then the experts over ep.
  if run.tp then model = accel.parallel.tensor_parallel(model, mesh) end
  model = accel.parallel.expert_parallel(model, mesh)
  local experts = #model.model.layers[1].block_sparse_moe.experts
  check.equal(experts, 2, what .. ": each ep rank holds 2 of the 4 experts")
  local opt
  model, opt = acc:prepare(model, adamw(model))
  -- Sharded over the ranks of dp_shard x cp holding the same experts (R of
  -- them) when there are several: each rank keeps 1/R of its experts'
  -- elements (padding aside), and no more.
  local expert_elements = 0
  for name, p in reference.model:named_parameters() do
    if name:find("%.experts%.") then expert_elements = expert_elements + p:numel() / mesh.ep.size end
  end
  local replicas = mesh.dp_shard_cp.size / mesh.ep.size
  local sharding = acc._models[1].expert_sharding
  check.equal(sharding ~= nil, replicas > 1, what .. ": the experts are sharded iff dp_shard x cp > ep_size")
  if sharding then
    local held = 0
    for _, shard in ipairs(sharding:shards()) do held = held + shard:numel() end
    check.truthy(held * replicas >= expert_elements and held * replicas < expert_elements + replicas * 64,
                 string.format("%s: each rank holds 1/%d of its experts' %d elements, got %d", what, replicas,
                               expert_elements, held))
  end
  local dp = mesh.dp
  local rows = ROWS / dp.size / accumulation
  for step = 1, STEPS do
    local x = batch(step)
    local summed, norm = 0, nil
    for micro = 1, accumulation do
      local mine = x:narrow(1, ((micro - 1) * dp.size + dp.rank) * rows + 1, rows)
      acc:accumulate(model, function()
        local out = model{ input_ids = mine, labels = mine }
        acc:backward(out.loss)
        norm = acc:clip_grad_norm(model:parameters(), MAX_NORM) or norm
        opt:step()
        opt:zero_grad()
        local loss = out.loss:detach():clone():view(1)
        dp:all_reduce(loss, "mean")
        summed = summed + loss:item()
      end)
    end
    check.near(summed / accumulation, reference.losses[step], 1e-5, string.format("%s: step %d's loss", what, step))
    check.near(norm, reference.norms[step], 1e-5, string.format("%s: step %d's gradient norm", what, step))
  end
  compare_weights(acc:get_state_dict(model), what .. ", after training")
  return acc, model, opt
end

local world = accel.PartialState().num_processes
-- fp16 on the CPU scales the loss only: the experts' gradients are unscaled with the others'.
local runs = world == 2 and { { dp_shard = 2 }, { dp_shard = 2, accumulation = 2, mixed_precision = "fp16" } }
             or { { dp_shard = 4 }, { dp_shard = 2, dp_replicate = 2, accumulation = 2 },
                  { dp_shard = 2, tp = 2, accumulation = 2 } }
local acc, model, opt
for _, run in ipairs(runs) do acc, model, opt = train(run) end

-- save_model writes the whole model's weights; load_model gives each rank its experts back.
-- One folder for all ranks, of this run alone (the TCP and MPI runs of this test may run beside it).
local dir = acc:gather_object(string.format("%s/expert_accelerator_%d_%d", os.getenv("ACCEL_TEST_TMPDIR") or "/tmp",
                                            os.time(), math.random(1e9)))[1]
acc:save_model(model, dir)
local written = core.formats.load_weights(dir)
compare_weights(written, "save_model's file")
acc:wait_for_everyone()
local fresh = tiny()
if acc.mesh.tp.size > 1 then fresh = accel.parallel.tensor_parallel(fresh, acc.mesh) end
fresh = accel.parallel.expert_parallel(fresh, acc.mesh)
local fresh_opt
fresh, fresh_opt = acc:prepare(fresh, adamw(fresh))
acc:load_model(fresh, dir)
compare_weights(acc:get_state_dict(fresh), "load_model's weights")
check.truthy(fresh_opt ~= nil, "the second model prepared with its optimizer")

-- Refused, naming the sizes (save_state and load_state: test_expert_checkpoint.lua).
check.raises(function() opt:state_dict() end, "the optimizer's state under ep",
             "the optimizer's state_dict under ep_size = 2 is not implemented yet")
check.raises(function() acc:prepare(tiny(), adamw(tiny())) end, "experts not split",
             "apply accel.parallel.expert_parallel(model, acc.mesh) before making its optimizer")
-- A recipe's own backward leaves the experts' gradients unsynchronised: the step refuses.
local x = batch(1):narrow(1, 1, 2)
model{ input_ids = x, labels = x }.loss:backward()
check.raises(function() opt:step() end, "a plain loss:backward() under ep",
             "the experts' gradients synchronise in acc:backward(loss)")
opt:zero_grad()
check.done("expert parallel accelerator")
