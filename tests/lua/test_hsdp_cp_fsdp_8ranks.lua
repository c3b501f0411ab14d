-- nproc: 8
-- HSDP with context parallelism, dp_replicate 2 x dp_shard 2 x cp 2: the
-- shards span dp_shard x cp (mesh.dp_shard_cp, 4 ranks), replicated over
-- dp_replicate, whose all-reduce of the gradient slices comes after the
-- reduce-scatter over the shard group. A small Llama (dropout off, each
-- decoder layer a unit) trains 10 AdamW steps with clipping, each step
-- accumulated over 2 micro-steps, to one process's losses, norms and
-- weights within 1e-5 (helpers/tensor_parallel_check.lua); each rank holds
-- a quarter of the model and both replicas hold equal shards
-- (helpers/fsdp_mesh_check.lua). Then the full composition, TP 2 x FSDP 2 x
-- CP 2 (dp_shard 2 x cp 2 x tp 2, llama's tp plan applied first, then ring
-- attention over each tp rank's heads): the same training to one process's
-- within 1e-5, each rank's tp slices sharded over its dp_shard_cp group
-- (4 ranks), a quarter of them and of AdamW's state on each rank. FSDP 2 x
-- CP 2 alone, and its checkpoints: test_cp_fsdp_4ranks.lua.
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
acc:free_memory()

o = { name = "TP 2 x FSDP 2 x CP 2", dp_shard = 2, cp = 2, tp = 2, plan = "default", accumulation = 2,
      fsdp_plugin = accel.FullyShardedDataParallelPlugin{ transformer_layer_cls = "LlamaDecoderLayer" } }
acc, model, opt = tp_check.run(check, o)
mesh = acc.mesh
-- rank = (dp_shard rank x 2 + cp rank) x 2 + tp rank.
local t, c, s = rank % 2, math.floor(rank / 2) % 2, math.floor(rank / 4)
local function ranks(list) return table.concat(list, ",") end
check.equal(ranks(mesh.tp.ranks), ranks({ rank - t, rank - t + 1 }), "tp group: neighbours")
check.equal(ranks(mesh.cp.ranks), ranks({ 4 * s + t, 4 * s + 2 + t }), "cp group")
check.equal(ranks(mesh.dp.ranks), ranks({ 2 * c + t, 4 + 2 * c + t }), "dp group: the loader's")
check.equal(ranks(mesh.dp_shard_cp.ranks), ranks({ t, t + 2, t + 4, t + 6 }),
            "dp_shard_cp: the shard group, the ranks of this tp rank's slices")
shard, whole = fsdp_mesh_check.shares(check, acc, model, opt, o, o.name)
check.truthy(math.abs(shard / whole - 1 / 4) < 0.01,
             string.format("this rank holds %d of its tp slices' %d elements: a quarter (up to padding)", shard, whole))
check.done("test_hsdp_cp_fsdp_8ranks")
