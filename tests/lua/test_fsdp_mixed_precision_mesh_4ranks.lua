-- nproc: 4
-- FSDP's mixed precision policy on a device mesh: HSDP 2 x 2 (dp_replicate
-- x dp_shard) and TP 2 x FSDP 2 train the small Llama for 6 AdamW steps
-- with param_dtype bfloat16 and reduce_dtype float32, through the same
-- flat parameters as FSDP over the world (test_fsdp_mixed_precision_2ranks.lua
-- holds the comparison with one process). On each layout, against the same
-- layout without a policy: the shard group gathers half the bytes at every
-- step, exactly, and reduce-scatters the same (float32); the losses follow
-- float32's within 5e-4 (relative; measured: 3.6e-5 HSDP, 6e-5 TP x FSDP), and lie
-- off it (bf16 computes); the optimizer steps float32 shards with float32
-- gradients and state; the gathered weights are float32.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local tp_check = dofile(arg[0]:match("(.*/)") .. "helpers/tensor_parallel_check.lua")
local F = accel.nn.functional

local STEPS, ROWS, T = 6, 8, 8
local LOSS_TOL = 5e-4
local V = tp_check.tiny.vocab_size

accel.set_seed(2)
local ids = accel.randint(0, V, { STEPS * ROWS, T + 1 })

local function train(layout, policy)
  local acc = accel.Accelerator{
    fsdp_plugin = accel.FullyShardedDataParallelPlugin{ transformer_layer_cls = "LlamaDecoderLayer",
                                                        mixed_precision_policy = policy },
    parallelism_config = accel.ParallelismConfig{ dp_replicate_size = layout.dp_replicate,
                                                  dp_shard_size = layout.dp_shard, tp_size = layout.tp } }
  local mesh = acc.mesh
  accel.set_seed(1)
  local model = accel.models.from_config(tp_check.tiny):train()
  if layout.tp > 1 then model = accel.parallel.tensor_parallel(model, mesh) end
  local opt = accel.optim.AdamW(model:parameters(), { lr = 1e-3, weight_decay = 0.01 })
  model, opt = acc:prepare(model, opt)
  local shard_group = mesh.dp_shard.group
  local per_rank = ROWS / mesh.dp.size
  local run = { losses = {}, gathered = {}, scattered = {} }
  for step = 1, STEPS do
    local rows = ids:narrow(1, (step - 1) * ROWS + mesh.dp.rank * per_rank + 1, per_rank)
    local before = shard_group:counts()
    local logits = model{ input_ids = rows:narrow(2, 1, T) }.logits
    local loss = F.cross_entropy(logits:reshape(-1, V):float(), rows:narrow(2, 2, T):reshape(-1) + 1)
    acc:backward(loss)
    for _, shard in ipairs(opt.optimizer:params()) do
      check.equal(shard.dtype, "float32", layout.name .. ": a shard")
      check.equal(shard.grad.dtype, "float32", layout.name .. ": a shard's gradient")
    end
    opt:step()
    opt:zero_grad()
    local after = shard_group:counts()
    run.gathered[step] = after.all_gather_bytes - before.all_gather_bytes
    run.scattered[step] = after.reduce_scatter_bytes - before.reduce_scatter_bytes
    local global = loss:detach():clone():view(1)
    mesh.dp:all_reduce(global, "mean")
    run.losses[step] = global:item()
  end
  for key, t in pairs(opt.optimizer:state_dict()) do
    if key:match("^state%.") and t:is_floating_point() then check.equal(t.dtype, "float32", layout.name .. ": " .. key) end
  end
  for name, t in pairs(acc:get_state_dict(model)) do
    if t:is_floating_point() then check.equal(t.dtype, "float32", layout.name .. ": gathered " .. name) end
  end
  acc:free_memory()
  return run
end

local layouts = {
  { name = "HSDP 2 x 2", dp_replicate = 2, dp_shard = 2, tp = 1 },
  { name = "TP 2 x FSDP 2", dp_replicate = 1, dp_shard = 2, tp = 2 },
}
local bf16 = { param_dtype = accel.bfloat16, reduce_dtype = accel.float32 }
for _, layout in ipairs(layouts) do
  local plain, mixed = train(layout, nil), train(layout, bf16)
  local worst, off = 0, false
  for step = 1, STEPS do
    check.truthy(plain.gathered[step] > 0, layout.name .. ": float32 gathers")
    check.equal(mixed.gathered[step] * 2, plain.gathered[step], layout.name .. ": half the bytes gathered, step " .. step)
    check.equal(mixed.scattered[step], plain.scattered[step], layout.name .. ": float32 reduce-scatters, step " .. step)
    worst = math.max(worst, math.abs(mixed.losses[step] - plain.losses[step]) / plain.losses[step])
    off = off or mixed.losses[step] ~= plain.losses[step]
  end
  if os.getenv("RANK") == "0" then
    print(string.format("%s: bf16 policy vs float32, largest relative loss difference %.3g", layout.name, worst))
  end
  check.truthy(worst <= LOSS_TOL, layout.name .. ": bf16 follows float32's losses: " .. worst)
  check.truthy(off, layout.name .. ": bf16 computes (its losses are not float32's)")
end

check.done("test_fsdp_mixed_precision_mesh_4ranks")
