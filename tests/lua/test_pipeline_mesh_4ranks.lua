-- nproc: 4
-- The mesh's pp and ep dims (ParallelismConfig's pp_size, ep_size and the
-- pipeline's settings): pp outermost, as torchtitan, so PP 2 x FSDP 2 puts
-- ranks {0, 1} on stage 1 and {2, 3} on stage 2; ep borrows the ranks of
-- dp_shard x cp; each group's all_reduce reaches its members only; sizes
-- the schedule or the mesh cannot take are refused naming them; and an
-- Accelerator is made on PP x EP.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local DeviceMesh = require("accel.parallel.device_mesh")
local rank = accel.Accelerator{}.process_index

local config = accel.ParallelismConfig{ pp_size = 2, dp_shard_size = 2, ep_size = 2, pp_microbatches = 4 }
check.equal(config.pp_schedule, "1F1B", "torchtitan's default schedule")
check.equal(config.pp_virtual_stages, 1, "one stage per rank by default")
check.equal(tostring(config), 'ParallelismConfig{dp_replicate_size = 1, dp_shard_size = 2, cp_size = 1, tp_size = 1, '
            .. 'pp_size = 2, pp_schedule = "1F1B", pp_microbatches = 4, pp_virtual_stages = 1, ep_size = 2}', "tostring")
check.equal(accel.ParallelismConfig{ pp_size = 4 }.pp_microbatches, 4, "pp_microbatches defaults to pp_size")

local mesh = DeviceMesh.new(config)
local stage_first = 2 * math.floor(rank / 2)
check.equal(table.concat(mesh.pp.ranks, ","), (rank % 2) .. "," .. (rank % 2 + 2), "pp group: one rank per stage")
check.equal(mesh.pp.rank, math.floor(rank / 2), "pp rank: the outermost coordinate")
check.equal(table.concat(mesh.dp.ranks, ","), stage_first .. "," .. stage_first + 1, "dp: the ranks of one stage")
check.equal(table.concat(mesh.ep.ranks, ","), stage_first .. "," .. stage_first + 1, "ep over dp_shard")
check.truthy(mesh.ep == mesh.dp_shard_cp, "ep over all of dp_shard x cp is that group")
local t = accel.tensor({ 2 ^ rank })
mesh.pp:all_reduce(t)
check.near(t, { 2 ^ (rank % 2) + 2 ^ (rank % 2 + 2) }, 0, "pp all_reduce sums its group only")

-- ep 2 of dp_shard 4: groups {0, 1} {2, 3}, its own group object.
local ep_mesh = DeviceMesh.new(accel.ParallelismConfig{ dp_shard_size = 4, ep_size = 2 })
check.equal(table.concat(ep_mesh.ep.ranks, ","), stage_first .. "," .. stage_first + 1, "ep 2 of dp_shard 4")
check.truthy(ep_mesh.ep ~= ep_mesh.dp_shard_cp, "ep smaller than dp_shard_cp is a group of its own")
t = accel.tensor({ 2 ^ rank })
ep_mesh.ep:all_reduce(t)
check.near(t, { 2 ^ stage_first + 2 ^ (stage_first + 1) }, 0, "ep all_reduce sums its group only")

-- Refusals naming the sizes.
check.raises(function() DeviceMesh.new(accel.ParallelismConfig{ pp_size = 2, dp_shard_size = 4 }) end, "product",
             "multiply to 8", "pp_size = 2", "world has 4 ranks")
check.raises(function() DeviceMesh.new(accel.ParallelismConfig{ dp_shard_size = 2, tp_size = 2, ep_size = 4 }) end,
             "ep", "ep_size = 4 must divide dp_shard_size x cp_size = 2")
check.raises(function() accel.ParallelismConfig{ pp_size = 4, pp_microbatches = 2 } end, "1F1B m < pp",
             "accel.ParallelismConfig: 1F1B needs at least as many micro-batches", "pp_microbatches = 2 < pp_size = 4")
check.raises(function() accel.ParallelismConfig{ pp_size = 2, pp_schedule = "GPipe", pp_virtual_stages = 2 } end,
             "GPipe v", "GPipe runs one stage per rank")
check.raises(function() accel.ParallelismConfig{ pp_size = 2, pp_schedule = "ZBV" } end, "unknown schedule",
             "unknown pp_schedule \"ZBV\"")
check.raises(function() accel.ParallelismConfig{ pp_size = 1.5 } end, "whole", "pp_size must be a whole number")
check.equal(accel.ParallelismConfig{ pp_size = 2, pp_schedule = "GPipe", pp_microbatches = 1 }.pp_microbatches, 1,
            "GPipe takes fewer micro-batches than stages")
-- PP x EP over each stage's dp_shard group is built (test_pipeline_expert_4ranks.lua trains it).
check.equal(accel.Accelerator{ parallelism_config = config }.mesh.ep.size, 2, "pp x ep: an Accelerator")
check.done("pipeline mesh")
