-- nproc: 8
-- HSDP with context parallelism, dp_replicate 2 x dp_shard 2 x cp 2: the
-- shards span dp_shard x cp (mesh.dp_shard_cp, 4 ranks), replicated over
-- dp_replicate, whose all-reduce of the gradient slices comes after the
-- reduce-scatter over the shard group. A small Llama (dropout off, each
-- decoder layer a unit) trains 10 AdamW steps with clipping, each step
-- accumulated over 2 micro-steps, to one process's losses, norms and
-- weights within 1e-5 (helpers/tensor_parallel_check.lua); each rank holds
-- a quarter of the model and both replicas hold equal shards
-- (helpers/fsdp_mesh_check.lua). FSDP 2 x CP 2 alone, and its checkpoints:
-- test_cp_fsdp_4ranks.lua.
local here = arg[0]:match("(.*/)")
local check = dofile(here .. "helpers/check.lua")
local tp_check = dofile(here .. "helpers/tensor_parallel_check.lua")
local fsdp_mesh_check = dofile(here .. "helpers/fsdp_mesh_check.lua")

local o = { name = "HSDP 2 x 2 x CP 2", dp_replicate = 2, dp_shard = 2, cp = 2, tp = 1, plan = "none", accumulation = 2,
            rows = 8, fsdp_plugin = accel.FullyShardedDataParallelPlugin{ transformer_layer_cls = "LlamaDecoderLayer" } }
local acc, model, opt = tp_check.run(check, o)
local mesh, rank = acc.mesh, acc.process_index
-- rank = replica x 4 + dp_shard rank x 2 + cp rank.
local first = 4 * math.floor(rank / 4)
check.equal(table.concat(mesh.dp_shard_cp.ranks, ","), table.concat({ first, first + 1, first + 2, first + 3 }, ","),
            "dp_shard_cp: the four ranks of this replica")
check.equal(table.concat(mesh.dp_replicate.ranks, ","), rank % 4 .. "," .. rank % 4 + 4, "dp_replicate group")
local shard, whole = fsdp_mesh_check.shares(check, acc, model, opt, o, o.name)
check.truthy(math.abs(shard / whole - 1 / 4) < 0.01,
             string.format("this rank holds %d of the model's %d elements: a quarter (up to padding)", shard, whole))
check.done("test_hsdp_cp_fsdp_8ranks")
