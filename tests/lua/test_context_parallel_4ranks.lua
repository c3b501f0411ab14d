-- nproc: 4
-- Context parallelism composed with tensor parallelism, CP 2 x TP 2
-- (ParallelismConfig{cp_size = 2, tp_size = 2}): tp groups {0,1} {2,3}, cp
-- groups {0,2} {1,3}; ring attention alone over that cp group and over a
-- ring of 4 (a mesh of cp_size 4) equals one process's; the load-balanced
-- split and its refusals; unevenly ignored labels give one process's loss
-- and SGD step; and 10 AdamW steps with clipping of a small Llama (dropout
-- off, llama's tp plan), with and without accumulation over 2 micro-steps,
-- give one process's losses and weights within 1e-5; so do DP 2 x CP 2's
-- (the loader sharded over dp, gradients averaged over dp x cp).
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local tp_check = dofile(arg[0]:match("(.*/)") .. "helpers/tensor_parallel_check.lua")
local cp_check = dofile(arg[0]:match("(.*/)") .. "helpers/context_parallel_check.lua")
local ring_check = dofile(arg[0]:match("(.*/)") .. "helpers/ring_attention_check.lua")

local acc = tp_check.run(check, { dp_replicate = 1, tp = 2, cp = 2, plan = "default" })
local mesh, rank = acc.mesh, acc.process_index
check.equal(table.concat(mesh.tp.ranks, ","), 2 * math.floor(rank / 2) .. "," .. 2 * math.floor(rank / 2) + 1, "tp group")
check.equal(table.concat(mesh.cp.ranks, ","), rank % 2 .. "," .. rank % 2 + 2, "cp group")
check.equal(table.concat(mesh.dp_cp.ranks, ","), rank % 2 .. "," .. rank % 2 + 2, "dp_cp group")
check.equal(mesh.cp.rank, math.floor(rank / 2), "cp rank")
tp_check.run(check, { dp_replicate = 1, tp = 2, cp = 2, plan = "default", accumulation = 2 })
tp_check.run(check, { dp_replicate = 2, tp = 1, cp = 2, plan = "default", accumulation = 2 })  -- DP 2 x CP 2
ring_check.run(check, mesh)
ring_check.run(check, accel.parallel.DeviceMesh.new(accel.ParallelismConfig{ cp_size = 4 }))
cp_check.layout(check, mesh)
cp_check.ignored_labels(check, { tp = 2, cp = 2 })
if rank == 0 then print(string.format("context parallel x tensor parallel (4 ranks): %d checks passed", check.passed)) end
