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
-- FSDP on the mesh: dp_shard = n (default 1), fsdp_plugin = a plugin, plan =
-- "none" (the model as built, no tensor_parallel: for tp 1), rows = the
-- rows of a step's batch (default 4; a multiple of dp x accumulation).
-- The norm acc:clip_grad_norm returns must be the reference's at each step.
-- With cp, the model is also accel.parallel.context_parallel's, each batch
-- split over cp (context_parallel_split) and the loss the model's of the
-- split (shifted) labels, the whole sequence's mean.
-- sequence_parallel = true: tensor_parallel with {sequence_parallel = true}
-- (llama's sp_plan; "vocab_parallel" then keeps lm_head's logits split with
-- "colwise_sequence").
local core = require("accel.core")
local F = accel.nn.functional

local tp_check = {}

tp_check.tiny = { model_type = "llama", vocab_size = 32, hidden_size = 16, intermediate_size = 32,
                  num_hidden_layers = 2, num_attention_heads = 4, num_key_value_heads = 2 }
local STEPS, ROWS, T, MAX_NORM = 10, 4, 8, 0.5

local function build()
  accel.set_seed(1)
  return accel.models.from_config(tp_check.tiny):train()
end

local function data(n_rows)
  accel.set_seed(2)
  return accel.randint(0, tp_check.tiny.vocab_size, { STEPS * n_rows, T + 1 })
end

local function optimizer(model)
  return accel.optim.AdamW(model:parameters(), { lr = 1e-2, weight_decay = 0.01 })
end

-- One process, the whole batch: losses and gradient norms per step and the
-- final state dict.
local function reference(check, ids, n_rows)
  local model = build()
  local opt = optimizer(model)
  local losses, norms = {}, {}
  for step = 1, STEPS do
    local rows = ids:narrow(1, (step - 1) * n_rows + 1, n_rows)
    local logits = model{ input_ids = rows:narrow(2, 1, T) }.logits
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
  local ids = data(n_rows)
  local expected_losses, expected_state, expected_norms = reference(check, ids, n_rows)

  local micro = o.accumulation or 1
  local acc = accel.Accelerator{ gradient_accumulation_steps = micro, fsdp_plugin = o.fsdp_plugin,
    parallelism_config = accel.ParallelismConfig{
      dp_replicate_size = o.dp_replicate, dp_shard_size = o.dp_shard, tp_size = o.tp, cp_size = o.cp } }
  local mesh = acc.mesh
  local plan
  if o.plan == "vocab_parallel" then
    plan = {}
    for k, v in pairs(require("accel.models.llama")[o.sequence_parallel and "sp_plan" or "tp_plan"]) do plan[k] = v end
    plan.lm_head = o.sequence_parallel and "colwise_sequence" or "colwise"  -- logits stay split over the vocabulary
  end
  local model = o.plan == "none" and build() or accel.parallel.tensor_parallel(build(), mesh, plan,
                                                                          { sequence_parallel = o.sequence_parallel })
  if o.cp then model = accel.parallel.context_parallel(model, mesh) end
  check.equal(model:state_dict()["model.layers.0.self_attn.q_proj.weight"]:size(1), 16 / o.tp, "q_proj rows on this tp rank")
  local opt = optimizer(model)
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
    opt:step()
    opt:zero_grad()
    local global = loss:detach():clone():view(1)
    mesh.dp:all_reduce(global, "mean")
    micro_steps, summed = micro_steps + 1, summed + global:item()
    if micro_steps % micro == 0 then
      step = step + 1
      check.truthy(acc.sync_gradients, string.format("micro-step %d synchronises", micro_steps))
      check.near(summed / micro, expected_losses[step], 1e-5, string.format("loss at step %d", step))
      check.near(norm, expected_norms[step], 1e-5, string.format("global gradient norm at step %d", step))
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
    check.near(full[name], t, 1e-5, name .. " after training")
  end
  return acc, model, opt
end

return tp_check
