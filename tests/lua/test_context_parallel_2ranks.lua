-- nproc: 2
-- Context parallelism over 2 ranks (accel.ParallelismConfig{cp_size = 2}):
-- ring attention alone equals F.scaled_dot_product_attention of the whole
-- sequence, output and gradients (causal and not, grouped-query or not); the
-- load-balanced split (rank 0 holds chunks 0 and 3 of 4, rank 1 chunks 1 and
-- 2), its inverse, and the refusals naming the lengths; labels ignored
-- unevenly over the ranks give one process's loss and SGD step; and 10 AdamW
-- steps with clipping of a small Llama (dropout off), with and without
-- accumulating each step over 2 micro-steps, give one process's losses and
-- weights within 1e-5.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local tp_check = dofile(arg[0]:match("(.*/)") .. "helpers/tensor_parallel_check.lua")
local cp_check = dofile(arg[0]:match("(.*/)") .. "helpers/context_parallel_check.lua")
local ring_check = dofile(arg[0]:match("(.*/)") .. "helpers/ring_attention_check.lua")

check.raises(function() accel.Accelerator{ parallelism_config = accel.ParallelismConfig{ cp_size = 4 } } end,
             "cp_size over the world", "multiply to 4", "cp_size = 4", "world has 2 ranks")

local acc = accel.Accelerator{ parallelism_config = accel.ParallelismConfig{ cp_size = 2 } }
local mesh, rank = acc.mesh, acc.process_index
check.equal(mesh.cp.rank, rank, "cp rank")
check.equal(table.concat(mesh.cp.ranks, ","), "0,1", "cp group")
check.equal(table.concat(mesh.dp_cp.ranks, ","), "0,1", "dp_cp group: the ranks gradients average over")
check.equal(mesh.dp.size * mesh.tp.size, 1, "dp and tp of size 1")
local received = mesh.cp.group:ring_shift(accel.tensor({ rank + 1 }))
check.near(received, { 2 - rank }, 0, "ring_shift brings the previous rank's tensor")

ring_check.run(check, mesh)
cp_check.layout(check, mesh)
cp_check.ignored_labels(check, { tp = 1, cp = 2 })
tp_check.run(check, { dp_replicate = 1, tp = 1, cp = 2, plan = "default" })
tp_check.run(check, { dp_replicate = 1, tp = 1, cp = 2, plan = "default", accumulation = 2 })
if rank == 0 then print(string.format("context parallel (2 ranks): %d checks passed", check.passed)) end
