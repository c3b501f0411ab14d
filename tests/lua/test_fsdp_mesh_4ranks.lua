-- nproc: 4
-- FSDP on the device mesh (ParallelismConfig's dp_shard_size > 1): FULL_SHARD
-- whose shards span a dp_shard group, not the world. TP 2 x FSDP 2 (the
-- vocabulary-parallel loss, layers wrapped one by one), HSDP 2 x 2
-- (dp_replicate 2 x dp_shard 2, a plain model) and FSDP 4 over dp_shard
-- alone each train 10 AdamW steps of a small Llama with clipping to the
-- global norm (which acts), the first two accumulating each step over 2
-- micro-steps, to one process's losses, norms and weights within 1e-5
-- (helpers/tensor_parallel_check.lua). Each rank holds its share: the
-- optimizer steps the flat shards, each 1/dp_shard of its flat parameter
-- (up to padding), and the model's parameters are empty between steps;
-- replicas (HSDP) hold equal shards. What is not implemented is refused
-- naming the sizes.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local tp_check = dofile(arg[0]:match("(.*/)") .. "helpers/tensor_parallel_check.lua")

local by_layer = accel.FullyShardedDataParallelPlugin{ transformer_layer_cls = "LlamaDecoderLayer" }

-- The elements of this rank's model before sharding: its tp slices and the
-- parameters whole on every tp rank, from a model built and split afresh
-- (no collective: each rank slices its own).
local function local_numel(mesh, tp)
  accel.set_seed(1)
  local model = accel.models.from_config(tp_check.tiny)
  if tp > 1 then model = accel.parallel.tensor_parallel(model, mesh) end
  local n = 0
  for _, p in ipairs(model:parameters()) do n = n + p:numel() end
  return n
end

local function check_shares(acc, model, opt, o, what)
  local mesh = acc.mesh
  local shards = mesh.dp_shard.size
  local sharded = acc._models[1].sharded
  check.equal(sharded:stage(), 3, what .. ": FULL_SHARD")
  check.equal(acc.distributed_type, "FSDP", what .. ": distributed_type")
  local layout = sharded:flat_parameters(opt.optimizer)
  local total, shard_total, any_split = 0, 0, false
  for k, flat in ipairs(layout.flats) do
    check.equal(flat.shards, shards, string.format("%s: flat parameter %d's shards span dp_shard", what, k))
    check.equal(flat.shard_rank, mesh.dp_shard.rank, string.format("%s: this rank's shard of flat %d", what, k))
    check.equal(flat.shard_numel, math.ceil(flat.numel / shards),
                string.format("%s: flat parameter %d's shard is 1/%d of its %d elements", what, k, shards, flat.numel))
    check.equal(flat.shard:numel(), flat.shard_numel, string.format("%s: flat %d's shard tensor", what, k))
    total, shard_total = total + flat.numel, shard_total + flat.shard_numel
    any_split = any_split or flat.split_over_tp
  end
  check.equal(total, local_numel(mesh, o.tp), what .. ": the flat parameters hold this rank's (tp) parameters")
  check.equal(any_split, o.tp > 1, what .. ": flat parameters of tp-split parameters exist under tp only")
  local stepped = 0
  for _, p in ipairs(opt.optimizer:params()) do stepped = stepped + p:numel() end
  check.equal(stepped, shard_total, what .. ": the optimizer steps the shards alone")
  check.truthy(shard_total * shards < total + shards * #layout.flats,
               string.format("%s: %d shard elements on this rank of %d", what, shard_total, total))
  for name, p in model:named_parameters() do
    check.equal(p:numel(), 0, what .. ": " .. name .. " is released between steps")
  end
  local counts = mesh.dp_shard.group:counts()
  check.truthy(counts.reduce_scatter > 0 and counts.all_gather > 0,
               what .. ": gradients reduce-scattered and parameters gathered over dp_shard")
  if mesh.dp_replicate.size > 1 then
    check.truthy(mesh.dp_replicate.group:counts().all_reduce > 0, what .. ": gradient slices all-reduced over dp_replicate")
    for k, flat in ipairs(layout.flats) do
      local replicas = mesh.dp_replicate:all_gather(flat.shard:detach())
      check.near(replicas[2], replicas[1], 0, string.format("%s: flat %d's shard equal on both replicas", what, k))
    end
  end
end

local layouts = {
  { name = "TP 2 x FSDP 2", dp_shard = 2, tp = 2, plan = "vocab_parallel", accumulation = 2, fsdp_plugin = by_layer },
  { name = "HSDP 2 x 2", dp_replicate = 2, dp_shard = 2, tp = 1, plan = "none", accumulation = 2, rows = 8,
    fsdp_plugin = by_layer },
  { name = "FSDP 4", dp_shard = 4, tp = 1, plan = "none" },
}
for _, o in ipairs(layouts) do
  local acc, model, opt = tp_check.run(check, o)
  check_shares(acc, model, opt, o, o.name)
  acc:free_memory()
end

-- Refused, naming the sizes.
local function config(sizes) return accel.ParallelismConfig(sizes) end
check.raises(function()
  accel.Accelerator{ parallelism_config = config{ dp_shard_size = 2, tp_size = 2 },
                     fsdp_plugin = accel.FullyShardedDataParallelPlugin{ sharding_strategy = "SHARD_GRAD_OP" } }
end, "SHARD_GRAD_OP over dp_shard", "sharding_strategy SHARD_GRAD_OP with dp_shard_size > 1 is not implemented "
  .. "(ParallelismConfig{dp_replicate_size = 1, dp_shard_size = 2, cp_size = 1, tp_size = 2})")
check.raises(function()
  accel.Accelerator{ parallelism_config = config{ dp_shard_size = 4 },
                     fsdp_plugin = accel.FullyShardedDataParallelPlugin{ sharding_strategy = "NO_SHARD" } }
end, "NO_SHARD over dp_shard", "sharding_strategy NO_SHARD with dp_shard_size > 1")
check.raises(function()
  accel.Accelerator{ parallelism_config = config{ dp_shard_size = 4 },
                     fsdp_plugin = accel.FullyShardedDataParallelPlugin{ cpu_ram_efficient_loading = true } }
end, "empty building on the mesh", "cpu_ram_efficient_loading")
check.raises(function() accel.Accelerator{ parallelism_config = config{ dp_shard_size = 4 }, zero_stage = 3 } end,
             "zero_stage with a mesh", "zero_stage (DeepSpeed) together with a parallelism_config")
check.raises(function() accel.Accelerator{ parallelism_config = config{ dp_shard_size = 2, cp_size = 2 } } end,
             "cp with dp_shard", "cp_size > 1 and dp_shard_size > 1")

check.done("test_fsdp_mesh_4ranks")
