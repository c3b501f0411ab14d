-- What the tests of experts through the Accelerator share
-- (test_expert_accelerator, test_expert_checkpoint, test_pipeline_expert_4ranks,
-- test_expert_mixed_precision): a tiny Mixtral (4 experts, top 2, float32)
-- and its batches of ROWS rows of T tokens, the same on every rank and in
-- every run; one process's training on them and the same through the
-- Accelerator under ep, compared.
local core = require("accel.core")

local expert_check = {}

expert_check.TINY = { model_type = "mixtral", vocab_size = 32, hidden_size = 16, intermediate_size = 32,
                      num_hidden_layers = 2, num_attention_heads = 4, num_key_value_heads = 2,
                      num_local_experts = 4, num_experts_per_tok = 2 }
expert_check.ROWS, expert_check.T = 8, 8
local STEPS, MAX_NORM, LR = 10, 0.5, 1e-2
expert_check.STEPS = STEPS

-- The model from `seed` (1 by default), in training mode.
function expert_check.tiny(seed)
  accel.set_seed(seed or 1)
  return accel.models.from_config(expert_check.TINY):train()
end

-- Step `step`'s batch of token ids: random, or `learnable` rows (each
-- counting up by a stride, modulo the vocabulary), on which a loss falls
-- far in a few steps.
function expert_check.batch(step, learnable)
  accel.set_seed(100 + step)
  local V, ROWS, T = expert_check.TINY.vocab_size, expert_check.ROWS, expert_check.T
  if not learnable then return accel.randint(0, V, { ROWS, T }) end
  local start, stride = accel.randint(0, V, { ROWS, 1 }), accel.randint(1, 4, { ROWS, 1 })
  return (start + stride * accel.arange(0, T, { dtype = accel.int64 }):view(1, -1)) % V
end

function expert_check.adamw(model, lr)
  return accel.optim.AdamW(model:parameters(), { lr = lr or LR, weight_decay = 0.01 })
end

-- ||a - b|| / ||b|| over every tensor of `b` (name -> tensor), by name.
function expert_check.relative_difference(a, b)
  local squares, norm = 0, 0
  for name, t in pairs(b) do
    squares, norm = squares + (a[name] - t):pow(2):sum():item(), norm + t:pow(2):sum():item()
  end
  return math.sqrt(squares / norm)
end

-- One process on the whole batches: {model, losses, norms, lr, learnable}
-- after STEPS AdamW steps with clipping to MAX_NORM (which acts: the first
-- norm exceeds it); o = {precision = "bf16" (the forward and the loss
-- under the autocast the Accelerator runs: bfloat16 on the CPU), lr = LR,
-- learnable = false}.
function expert_check.reference(check, o)
  o = o or {}
  local model = expert_check.tiny()
  local opt = expert_check.adamw(model, o.lr)
  local losses, norms = {}, {}
  for step = 1, STEPS do
    local x = expert_check.batch(step, o.learnable)
    local function forward() return model{ input_ids = x, labels = x }.loss end
    local loss = (o.precision == "bf16" and core.amp.autocast(forward, "bfloat16", "cpu") or forward()):float()
    loss:backward()
    norms[step] = core.clip_grad_norm(model:parameters(), MAX_NORM):item()
    check.truthy(step > 1 or norms[1] > MAX_NORM, "the reference's first norm exceeds max_norm")
    opt:step()
    opt:zero_grad()
    losses[step] = loss:item()
  end
  return { model = model, losses = losses, norms = norms, lr = o.lr, learnable = o.learnable }
end

-- `state` (name -> tensor: full weights) holds the reference model's names,
-- no more, each within `tol` (1e-5).
function expert_check.compare_weights(check, ref, state, what, tol)
  local compared = 0
  for name, p in ref.model:named_parameters() do
    check.truthy(state[name] ~= nil, what .. ": " .. name .. " in the full weights")
    check.near(state[name], p, tol or 1e-5, what .. ": " .. name)
    compared = compared + 1
  end
  local count = 0
  for _ in pairs(state) do count = count + 1 end
  check.equal(count, compared, what .. ": the full weights hold the whole model's names, no more")
end

-- The same training through Accelerator{ParallelismConfig{dp_shard_size =
-- run.dp_shard, dp_replicate_size = run.dp_replicate, tp_size = run.tp,
-- ep_size = 2}, gradient_accumulation_steps = run.accumulation,
-- mixed_precision = run.mixed_precision}, the model split by
-- tensor_parallel (under tp: each expert over tp too, Mixtral's tp_plan)
-- then expert_parallel: each step's loss (averaged over the micro-steps
-- and dp) and clipped norm equal ref's, and the full weights after
-- training (get_state_dict) ref's model's, within 1e-5, or within
-- run.tolerances = {loss, norm, weights} (relative; the weights' as
-- ||W - W_ref|| / ||W_ref||: AdamW's sign-like steps on near-zero
-- gradients turn bf16's rounding into large differences of single weights,
-- in one process alone too). Returns acc, model, opt and the largest
-- relative differences measured {loss, norm, weights}.
function expert_check.train(check, ref, run)
  local accumulation = run.accumulation or 1
  local tol = run.tolerances or { loss = 1e-5, norm = 1e-5 }
  local config = accel.ParallelismConfig{ dp_shard_size = run.dp_shard, dp_replicate_size = run.dp_replicate,
                                          tp_size = run.tp, ep_size = 2 }
  local what = string.format("%s, accumulation %d%s", tostring(config), accumulation,
                             run.mixed_precision and (", " .. run.mixed_precision) or "")
  local acc = accel.Accelerator{ parallelism_config = config, gradient_accumulation_steps = accumulation,
                                 mixed_precision = run.mixed_precision }
  local mesh = acc.mesh
  local model = expert_check.tiny()
  if run.tp then model = accel.parallel.tensor_parallel(model, mesh) end
  model = accel.parallel.expert_parallel(model, mesh)
  check.equal(#model.model.layers[1].block_sparse_moe.experts, 2, what .. ": each ep rank holds 2 of the 4 experts")
  local opt
  model, opt = acc:prepare(model, expert_check.adamw(model, ref.lr))
  -- Sharded over the ranks of dp_shard x cp holding the same experts (R of
  -- them) when there are several: each rank keeps 1/R of its experts'
  -- elements (padding aside), and no more.
  local expert_elements = 0
  for name, p in ref.model:named_parameters() do
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
  local rows = expert_check.ROWS / dp.size / accumulation
  local worst = { loss = 0, norm = 0 }
  for step = 1, STEPS do
    local x = expert_check.batch(step, ref.learnable)
    local summed, norm = 0, nil
    for micro = 1, accumulation do
      local mine = x:narrow(1, ((micro - 1) * dp.size + dp.rank) * rows + 1, rows)
      acc:accumulate(model, function()
        local out = model{ input_ids = mine, labels = mine }
        acc:backward(out.loss)
        norm = acc:clip_grad_norm(model:parameters(), MAX_NORM) or norm
        opt:step()
        opt:zero_grad()
        local loss = out.loss:detach():float():clone():view(1)
        dp:all_reduce(loss, "mean")
        summed = summed + loss:item()
      end)
    end
    local loss = summed / accumulation
    if type(norm) ~= "number" then norm = norm:item() end
    worst.loss = math.max(worst.loss, math.abs(loss - ref.losses[step]) / ref.losses[step])
    worst.norm = math.max(worst.norm, math.abs(norm - ref.norms[step]) / ref.norms[step])
    check.near(loss, ref.losses[step], tol.loss, string.format("%s: step %d's loss", what, step))
    check.near(norm, ref.norms[step], tol.norm, string.format("%s: step %d's gradient norm", what, step))
  end
  local full = acc:get_state_dict(model)
  if tol.weights then
    local theirs = ref.model:state_dict()
    for name, t in pairs(full) do
      check.truthy(theirs[name] ~= nil, string.format("%s: %s is one of the whole model's names", what, name))
      check.equal(t.dtype, "float32", string.format("%s: %s stays float32 (master weights)", what, name))
    end
    worst.weights = expert_check.relative_difference(full, theirs)
    check.truthy(worst.weights <= tol.weights, string.format("%s: the weights after training differ by %.3g relative "
                                                             .. "(tolerance %g)", what, worst.weights, tol.weights))
  else
    expert_check.compare_weights(check, ref, full, what .. ", after training")
  end
  return acc, model, opt, worst
end

return expert_check
