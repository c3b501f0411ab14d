-- Tensor-parallel training of a small Llama against one process: the same
-- model (seeded), the same 10 batches of 4 rows, AdamW with clipping to the
-- global gradient norm. The reference runs here too, alone (no collective);
-- then the same training under Accelerator{parallelism_config = ...} with
-- accel.parallel.tensor_parallel, fed by a prepared DataLoader (sharded over
-- the mesh's dp dim), optionally accumulating each step's gradient over
-- `accumulation` micro-steps. Losses per step (averaged over dp and
-- micro-steps) and the gathered weights (accel.parallel.full_state_dict, or
-- acc:get_state_dict) must equal the reference's within 1e-5 (checkpoints
-- under tp: test_mesh_checkpoint_2ranks.lua).
--   tp_check.run(check, {dp_replicate = n, tp = n, plan = "vocab_parallel" | "default",
--                        accumulation = n (default 1), cp = n (default 1)})
-- config = {model_type = "qwen2", ...}: another architecture of the same
-- sizes ("default" then uses its own tp_plan).
-- FSDP on the mesh: dp_shard = n (default 1), fsdp_plugin = a plugin, plan =
-- "none" (the model as built, no tensor_parallel: for tp 1), rows = the
-- rows of a step's batch (default 4; a multiple of dp x accumulation).
-- The norm acc:clip_grad_norm returns must be the reference's at each step.
-- device = "cuda:0" ...: where the reference trains (default the CPU); give
-- the Accelerator's (tests/gpu/mesh.lua), so that the gathered weights and
-- the reference's are compared on one device.
-- With cp, the model is also accel.parallel.context_parallel's, each batch
-- split over cp (context_parallel_split) and the loss the model's of the
-- split (shifted) labels, the whole sequence's mean.
-- sequence_parallel = true: tensor_parallel with {sequence_parallel = true}
-- (llama's sp_plan; "vocab_parallel" then keeps lm_head's logits split with
-- "colwise_sequence").
-- mixed_precision = "bf16" | "fp16": the Accelerator's, and the reference's
-- forward under the same autocast as the Accelerator's (bfloat16, results
-- back to float32; fp16 on the CPU scales the loss only, by powers of two,
-- which changes no float32 value, so its reference is float32's); every
-- rank's parameters, gradients and AdamW state must stay float32 (master
-- weights). tolerances = {first_loss, loss, norm, weights}, relative (the
-- weights' over all parameters: ||W - W_ref|| / ||W_ref||), replace 1e-5;
-- then the reference is also trained with the learning rate x 1.1 and must
-- stray from itself beyond the loss and weights tolerances (so they can
-- fail), its loss must fall by more than 10x the loss tolerance, and the
-- rows are learnable (each counts up by a stride, modulo the vocabulary)
-- with lr 1e-3: on random tokens with lr 1e-2, AdamW's sign-like steps on
-- the near-zero gradients of the attention projections at init turn bf16's
-- rounding into weight differences as large as that 10% change of learning
-- rate, in one process alone (one batch against two half batches
-- accumulated), so no tolerance could tell them apart. name = a label for
-- the messages and the line reporting the differences measured.
local core = require("accel.core")
local F = accel.nn.functional

local tp_check = {}

tp_check.tiny = { model_type = "llama", vocab_size = 32, hidden_size = 16, intermediate_size = 32,
                  num_hidden_layers = 2, num_attention_heads = 4, num_key_value_heads = 2 }
local STEPS, ROWS, T, MAX_NORM = 10, 4, 8, 0.5

-- bf16 under a mesh against one process in bf16, from measurement (relative;
-- --threads 1). bf16 rounds a product split over ranks (partial sums
-- rounded to bf16, then summed) differently from the whole product, as
-- does one process given another valid order: its step taken as two half
-- batches accumulated strays from it by up to 3.5e-5 (loss), 4.4e-4
-- (gradient norm) and 6.1e-4 (weights), and one process in float32 by
-- 2.7e-5, 5e-4 and 6e-4. The mesh layouts measured (TP 2, TP 2 + SP, CP 2,
-- TP 2 x FSDP 2, HSDP 2 x 2, CP 2 x TP 2, TP 2 x DP 2 + SP) stray by at most
-- 9.3e-6 at the first step's loss, 5e-5 (loss), 1.1e-3 (norm) and 1.3e-3
-- (weights); a learning rate 10% higher strays by 2.2e-3 (last loss) and
-- 4.3e-3 (weights), and the loss falls by 2.8e-2 over the 10 steps. So:
-- 10x the measured bound for the losses, 4.5x for the norm, and for the
-- weights 2.5e-3, between the layouts' 1.3e-3 and that 10% change's 4.3e-3.
tp_check.bf16_tolerances = { first_loss = 1e-4, loss = 5e-4, norm = 5e-3, weights = 2.5e-3 }

-- The small Llama, or with `overrides` (o.config) another architecture of
-- the same sizes (model_type "mistral", "qwen2", "mixtral" ...).
local function build(overrides)
  local cfg = {}
  for k, v in pairs(tp_check.tiny) do cfg[k] = v end
  for k, v in pairs(overrides or {}) do cfg[k] = v end
  accel.set_seed(1)
  return accel.models.from_config(cfg):train()
end

local function data(n_rows, learnable)
  accel.set_seed(2)
  local V = tp_check.tiny.vocab_size
  if not learnable then return accel.randint(0, V, { STEPS * n_rows, T + 1 }) end
  local start, stride = accel.randint(0, V, { STEPS * n_rows, 1 }), accel.randint(1, 4, { STEPS * n_rows, 1 })
  return (start + stride * accel.arange(0, T + 1, { dtype = accel.int64 }):view(1, -1)) % V
end

local function optimizer(model, lr)
  return accel.optim.AdamW(model:parameters(), { lr = lr, weight_decay = 0.01 })
end

-- The model's logits as the Accelerator's forward gives them under `precision`.
local function logits_of(model, inputs, precision)
  if precision ~= "bf16" then return model{ input_ids = inputs }.logits end
  return core.amp.autocast(function() return model{ input_ids = inputs }.logits end, "bfloat16", "cpu"):float()
end

-- ||a - b|| / ||b|| over every tensor of the state dict b.
local function relative_difference(a, b)
  local squares, norm = 0, 0
  for name, t in pairs(b) do
    squares, norm = squares + (a[name]:to(t.device) - t):pow(2):sum():item(), norm + t:pow(2):sum():item()
  end
  return math.sqrt(squares / norm)
end

-- Master weights: under mixed precision what the optimizer steps, their
-- gradients (what the gradient reducer or the reduce-scatter carried) and
-- its state stay float32 on every rank.
local function check_float32_state(check, opt, what)
  for i, p in ipairs(opt.optimizer:params()) do
    check.equal(p.dtype, "float32", string.format("%s: optimizer parameter %d", what, i))
    if p.grad then check.equal(p.grad.dtype, "float32", string.format("%s: optimizer parameter %d's gradient", what, i)) end
  end
  for key, t in pairs(opt.optimizer:state_dict()) do
    if key:match("^state%.") and t:is_floating_point() then  -- (param_groups' hyperparameters are float64)
      check.equal(t.dtype, "float32", string.format("%s: optimizer state %s", what, key))
    end
  end
end

-- One process, the whole batch: losses and gradient norms per step and the
-- final state dict.
local function reference(check, ids, n_rows, precision, lr, device, overrides)
  local model = build(overrides):to(device or "cpu")
  local opt = optimizer(model, lr)
  local losses, norms = {}, {}
  for step = 1, STEPS do
    local rows = ids:narrow(1, (step - 1) * n_rows + 1, n_rows):to(device or "cpu")
    local logits = logits_of(model, rows:narrow(2, 1, T), precision)
    local targets = rows:narrow(2, 2, T):reshape(-1) + 1  -- cross_entropy's classes are 1-based
    local loss = F.cross_entropy(logits:reshape(-1, tp_check.tiny.vocab_size), targets)
    loss:backward()
    local norm = core.clip_grad_norm(model:parameters(), MAX_NORM):item()
    if step == 1 then check.truthy(norm > MAX_NORM, "the reference's first gradient norm exceeds max_norm (clipping acts)") end
    opt:step()
    opt:zero_grad()
    losses[step], norms[step] = loss:item(), norm
  end
  return losses, model:state_dict(), norms
end

function tp_check.run(check, o)
  local n_rows = o.rows or ROWS
  local ids = data(n_rows, o.tolerances)
  local lr = o.tolerances and 1e-3 or 1e-2
  local expected_losses, expected_state, expected_norms = reference(check, ids, n_rows, o.mixed_precision, lr, o.device,
                                                                     o.config)
  local tol = o.tolerances or { first_loss = 1e-5, loss = 1e-5, norm = 1e-5 }
  local what = (o.mixed_precision or "float32") .. (o.name and " " .. o.name or "")
  local worst = { first_loss = 0, loss = 0, norm = 0, weights = 0 }  -- relative differences from the reference, reported
  local function note(key, actual, expected)
    if type(actual) == "userdata" then actual = actual:item() end
    worst[key] = math.max(worst[key], math.abs(actual - expected) / math.abs(expected))
  end

  local micro = o.accumulation or 1
  local acc = accel.Accelerator{ gradient_accumulation_steps = micro, fsdp_plugin = o.fsdp_plugin,
    mixed_precision = o.mixed_precision,
    parallelism_config = accel.ParallelismConfig{
      dp_replicate_size = o.dp_replicate, dp_shard_size = o.dp_shard, tp_size = o.tp, cp_size = o.cp } }
  local mesh = acc.mesh
  local plan
  if o.plan == "vocab_parallel" then
    plan = {}
    for k, v in pairs(require("accel.models.llama")[o.sequence_parallel and "sp_plan" or "tp_plan"]) do plan[k] = v end
    plan.lm_head = o.sequence_parallel and "colwise_sequence" or "colwise"  -- logits stay split over the vocabulary
  end
  local model = o.plan == "none" and build(o.config) or accel.parallel.tensor_parallel(build(o.config), mesh, plan,
                                                                          { sequence_parallel = o.sequence_parallel })
  if o.cp then model = accel.parallel.context_parallel(model, mesh) end
  check.equal(model:state_dict()["model.layers.0.self_attn.q_proj.weight"]:size(1), 16 / o.tp, "q_proj rows on this tp rank")
  local opt = optimizer(model, lr)
  local loader = accel.data.DataLoader(accel.data.TensorDataset(ids), { batch_size = n_rows / mesh.dp.size / micro })
  model, opt, loader = acc:prepare(model, opt, loader)
  local step, micro_steps, summed = 0, 0, 0
  for rows in loader:iter() do acc:accumulate(model, function()
    local inputs, targets = rows:narrow(2, 1, T), rows:narrow(2, 2, T)
    local loss
    if o.cp then
      loss = model(accel.parallel.context_parallel_split({ input_ids = inputs, shift_labels = targets }, mesh)).loss
    elseif o.plan == "vocab_parallel" then
      local logits = model{ input_ids = inputs }.logits
      check.equal(logits:size(3), tp_check.tiny.vocab_size / o.tp, "logits on a rank are its vocabulary slice")
      loss = accel.parallel.vocab_parallel_cross_entropy(logits, targets, mesh.tp)
    else
      local logits = model{ input_ids = inputs }.logits
      loss = F.cross_entropy(logits:reshape(-1, tp_check.tiny.vocab_size), targets:reshape(-1) + 1)
    end
    acc:backward(loss)
    local norm = acc:clip_grad_norm(model:parameters(), MAX_NORM)  -- only where the optimizer steps
    if o.mixed_precision and micro_steps == micro - 1 then check_float32_state(check, opt, what) end
    opt:step()
    opt:zero_grad()
    local global = loss:detach():clone():view(1)
    mesh.dp:all_reduce(global, "mean")
    micro_steps, summed = micro_steps + 1, summed + global:item()
    if micro_steps % micro == 0 then
      step = step + 1
      check.truthy(acc.sync_gradients, string.format("micro-step %d synchronises", micro_steps))
      note(step == 1 and "first_loss" or "loss", summed / micro, expected_losses[step])
      note("norm", norm, expected_norms[step])
      check.near(summed / micro, expected_losses[step], step == 1 and tol.first_loss or tol.loss,
                 string.format("%s: loss at step %d", what, step))
      check.near(norm, expected_norms[step], tol.norm, string.format("%s: global gradient norm at step %d", what, step))
      summed = 0
    end
  end) end
  check.equal(step, STEPS, "steps from the prepared loader")
  -- Sharded (dp_shard > 1), the parameters are gathered only by get_state_dict.
  local full = (o.plan ~= "vocab_parallel" or acc.sharding) and acc:get_state_dict(model)
    or accel.parallel.full_state_dict(model, mesh)
  for name, t in pairs(expected_state) do
    check.truthy(full[name] ~= nil, name .. " in the gathered state dict")
    check.equal(table.concat(full[name]:size(), "x"), table.concat(t:size(), "x"), name .. "'s gathered shape")
    if not tol.weights then check.near(full[name], t, 1e-5, name .. " after training") end
  end
  if tol.weights then
    worst.weights = relative_difference(full, expected_state)
    check.truthy(worst.weights <= tol.weights, string.format("%s: the weights after training differ by %.3g relative "
                                                             .. "(tolerance %g)", what, worst.weights, tol.weights))
  end
  if o.mixed_precision then check_float32_state(check, opt, what) end
  if o.tolerances then
    local losses, state = reference(check, ids, n_rows, o.mixed_precision, 1.1 * lr, o.device, o.config)
    local strayed = relative_difference(state, expected_state)
    local last = math.abs(losses[STEPS] - expected_losses[STEPS]) / expected_losses[STEPS]
    if acc.is_main_process then
      print(string.format("%s: largest relative difference from one process: first loss %.2g, loss %.2g, gradient "
                          .. "norm %.2g, weights %.2g (tolerances %g, %g, %g, %g); one process with lr x 1.1: last "
                          .. "loss %.2g, weights %.2g", what, worst.first_loss, worst.loss, worst.norm, worst.weights,
                          tol.first_loss, tol.loss, tol.norm, tol.weights, last, strayed))
    end
    check.truthy(strayed > tol.weights and last > tol.loss,
                 what .. ": one process with a learning rate 10% higher strays beyond the tolerances")
    check.truthy(expected_losses[1] - expected_losses[STEPS] > 10 * tol.loss * expected_losses[1],
                 what .. ": the loss falls over the steps by more than 10x its tolerance")
  end
  return acc, model, opt
end

return tp_check
