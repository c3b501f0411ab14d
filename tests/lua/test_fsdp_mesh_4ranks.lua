-- nproc: 4
-- FSDP on the device mesh (ParallelismConfig's dp_shard_size > 1): FULL_SHARD
-- whose shards span a dp_shard group, not the world. TP 2 x FSDP 2 (the
-- vocabulary-parallel loss, layers wrapped one by one), HSDP 2 x 2
-- (dp_replicate 2 x dp_shard 2, a plain model) and FSDP 4 over dp_shard
-- alone each train 10 AdamW steps of a small Llama with clipping to the
-- global norm (which acts), the first two accumulating each step over 2
-- micro-steps, to one process's losses, norms and weights within 1e-5
-- (helpers/tensor_parallel_check.lua). Each rank holds its share
-- (helpers/fsdp_mesh_check.lua): the optimizer steps the flat shards, each
-- 1/dp_shard of its flat parameter (up to padding), and the model's
-- parameters are empty between steps; replicas (HSDP) hold equal shards.
-- What is not implemented is refused naming the sizes. (FSDP with context
-- parallelism: test_cp_fsdp_4ranks.lua.)
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local tp_check = dofile(arg[0]:match("(.*/)") .. "helpers/tensor_parallel_check.lua")
local fsdp_mesh_check = dofile(arg[0]:match("(.*/)") .. "helpers/fsdp_mesh_check.lua")

local by_layer = accel.FullyShardedDataParallelPlugin{ transformer_layer_cls = "LlamaDecoderLayer" }

local layouts = {
  { name = "TP 2 x FSDP 2", dp_shard = 2, tp = 2, plan = "vocab_parallel", accumulation = 2, fsdp_plugin = by_layer },
  { name = "HSDP 2 x 2", dp_replicate = 2, dp_shard = 2, tp = 1, plan = "none", accumulation = 2, rows = 8,
    fsdp_plugin = by_layer },
  { name = "FSDP 4", dp_shard = 4, tp = 1, plan = "none" },
}
for _, o in ipairs(layouts) do
  local acc, model, opt = tp_check.run(check, o)
  fsdp_mesh_check.shares(check, acc, model, opt, o, o.name)
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

check.done("test_fsdp_mesh_4ranks")
