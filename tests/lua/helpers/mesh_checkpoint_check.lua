-- Training runs for checkpoints under a device mesh (tests/lua/
-- test_mesh_checkpoint_2ranks.lua, tests/launch/mesh_checkpoint.lua): a
-- small Llama (float32, dropout off), split over tp when a tp size is given,
-- trained with AdamW, a cosine schedule with warmup and clipping, from a
-- shuffled prepared loader of 10 batches (one epoch: 10 updates).
--   local run = mc.setup{tp = 2 | nil (no mesh), seed = 1, state_dict_type = "SHARDED_STATE_DICT" | nil,
--                        dp_shard = n, dp_replicate = n, cp = n, mixed_precision = "bf16" | "fp16" | nil}
-- With dp_shard > 1 (FSDP on the mesh) each decoder layer is a unit; with
-- cp > 1 the model is context parallel and each batch split over cp; over
-- dp ranks each rank's batch is its 1/dp of the 4 rows a step takes, so
-- that every mesh trains on the same global batches, and the losses are
-- averaged over dp.
--   local losses = mc.train(run, 5, {[5] = function() run.acc:save_state(dir) end})
local F = accel.nn.functional

local mc = {}

mc.tiny = { model_type = "llama", vocab_size = 32, hidden_size = 16, intermediate_size = 32,
            num_hidden_layers = 2, num_attention_heads = 4, num_key_value_heads = 2 }
mc.STEPS = 10
local ROWS, T, MAX_NORM = 4, 8, 0.5

-- The data set: the same on every rank and in every run.
function mc.data()
  accel.set_seed(2)
  return accel.randint(0, mc.tiny.vocab_size, { mc.STEPS * ROWS, T + 1 })
end

-- The model as one process builds it from `seed` (a resumed run builds from
-- another seed, so that only the checkpoint can make it equal).
function mc.build(seed)
  accel.set_seed(seed)
  return accel.models.from_config(mc.tiny):train()
end

-- A prepared run: {acc, model, opt, sched, loader}.
function mc.setup(o)
  local options = { mixed_precision = o.mixed_precision }
  if o.tp or o.dp_shard or o.dp_replicate or o.cp then
    options.parallelism_config = accel.ParallelismConfig{ tp_size = o.tp, dp_shard_size = o.dp_shard,
                                                          dp_replicate_size = o.dp_replicate, cp_size = o.cp }
    if o.state_dict_type or o.dp_shard then
      options.fsdp_plugin = accel.FullyShardedDataParallelPlugin{ state_dict_type = o.state_dict_type,
        transformer_layer_cls = o.dp_shard and o.dp_shard > 1 and "LlamaDecoderLayer" or nil }
    end
  end
  local acc = accel.Accelerator(options)
  local model = mc.build(o.seed or 1)
  if o.tp then model = accel.parallel.tensor_parallel(model, acc.mesh) end
  if o.cp then model = accel.parallel.context_parallel(model, acc.mesh) end
  local opt = accel.optim.AdamW(model:parameters(), { lr = 1e-2, weight_decay = 0.01 })
  local sched = accel.optim.lr_scheduler.cosine(opt, { warmup = 2, total = mc.STEPS })
  local dp = acc.mesh and acc.mesh.dp.size or 1
  local loader = accel.data.DataLoader(accel.data.TensorDataset(mc.data()), { batch_size = ROWS / dp, shuffle = true })
  model, opt, loader, sched = acc:prepare(model, opt, loader, sched)
  return { acc = acc, model = model, opt = opt, sched = sched, loader = loader, cp_mesh = o.cp and acc.mesh }
end

-- The loss of a batch of token rows, from the full logits; under context
-- parallelism (`cp_mesh`, the mesh) the model's, of this rank's part of them.
function mc.loss(model, rows, cp_mesh)
  if cp_mesh then
    local split = { input_ids = rows:narrow(2, 1, T), shift_labels = rows:narrow(2, 2, T) }
    return model(accel.parallel.context_parallel_split(split, cp_mesh)).loss
  end
  local logits = model{ input_ids = rows:narrow(2, 1, T) }.logits
  return F.cross_entropy(logits:reshape(-1, mc.tiny.vocab_size), rows:narrow(2, 2, T):reshape(-1) + 1)
end

-- Trains up to `steps` updates from the loader's position (what is left of
-- the epoch); after update u runs hooks[u]. Returns the losses.
function mc.train(run, steps, hooks)
  local losses = {}
  for rows in run.loader:iter() do
    local loss = mc.loss(run.model, rows, run.cp_mesh)
    run.acc:backward(loss)
    run.acc:clip_grad_norm(run.model:parameters(), MAX_NORM)
    run.opt:step()
    run.sched:step()
    run.opt:zero_grad()
    local global = loss:detach():clone():view(1)
    if run.acc.mesh then run.acc.mesh.dp:all_reduce(global, "mean") end
    losses[#losses + 1] = global:item()
    if hooks and hooks[#losses] then hooks[#losses]() end
    if #losses == steps then break end
  end
  return losses
end

-- The same 10 updates in one process without an Accelerator (no
-- collective): the losses and the final weights.
function mc.reference()
  local model = mc.build(1)
  local opt = accel.optim.AdamW(model:parameters(), { lr = 1e-2, weight_decay = 0.01 })
  local sched = accel.optim.lr_scheduler.cosine(opt, { warmup = 2, total = mc.STEPS })
  local loader = accel.data.DataLoader(accel.data.TensorDataset(mc.data()), { batch_size = ROWS, shuffle = true })
  local losses = {}
  for rows in loader:iter() do
    local loss = mc.loss(model, rows)
    loss:backward()
    require("accel.core").clip_grad_norm(model:parameters(), MAX_NORM)
    opt:step()
    sched:step()
    opt:zero_grad()
    losses[#losses + 1] = loss:item()
  end
  return losses, model:state_dict()
end

-- Every tensor of `actual` (name -> tensor) equals `expected`'s, in shape and
-- within `tol`; both hold the same names. Returns the largest difference.
function mc.same_state(check, actual, expected, tol, what)
  local largest = 0
  for name, t in pairs(expected) do
    local a = actual[name]
    check.truthy(a ~= nil, string.format("%s: %s present", what, name))
    check.equal(table.concat(a:size(), "x"), table.concat(t:size(), "x"), string.format("%s: %s's shape", what, name))
    local diff = (a:float() - t:float()):abs():max():item()
    largest = math.max(largest, diff)
    check.truthy(diff <= tol, string.format("%s: %s differs by %g (tolerance %g)", what, name, diff, tol))
  end
  for name in pairs(actual) do check.truthy(expected[name] ~= nil, string.format("%s: %s expected", what, name)) end
  return largest
end

return mc
