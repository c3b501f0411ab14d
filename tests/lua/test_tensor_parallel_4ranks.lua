-- nproc: 4
-- Tensor parallelism composed with data parallelism, TP 2 x DP 2
-- (ParallelismConfig{dp_replicate_size = 2, tp_size = 2}): tp groups are
-- neighbours {0,1} {2,3}, dp groups {0,2} {1,3}; each group's collectives
-- reach its members only; and 10 AdamW steps with clipping of a small Llama
-- (vocabulary-parallel loss, the loader sharded over dp) equal one process's
-- within 1e-5, also accumulating each step over 2 micro-steps, and with
-- sequence parallelism (llama's sp_plan) accumulating. ctest runs it
-- again with shared memory off (the groups over Gloo's TCP path).
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local tp_check = dofile(arg[0]:match("(.*/)") .. "helpers/tensor_parallel_check.lua")

tp_check.run(check, { dp_replicate = 2, tp = 2, plan = "vocab_parallel", accumulation = 2 })
tp_check.run(check, { dp_replicate = 2, tp = 2, plan = "default", sequence_parallel = true, accumulation = 2 })
local acc = tp_check.run(check, { dp_replicate = 2, tp = 2, plan = "vocab_parallel" })
local mesh, rank = acc.mesh, acc.process_index
local tp_first, dp_first = 2 * math.floor(rank / 2), rank % 2
check.equal(table.concat(mesh.tp.ranks, ","), tp_first .. "," .. tp_first + 1, "tp group")
check.equal(table.concat(mesh.dp.ranks, ","), dp_first .. "," .. dp_first + 2, "dp group")
check.equal(table.concat(mesh.dp_replicate.ranks, ","), dp_first .. "," .. dp_first + 2, "dp_replicate group")
check.equal(mesh.tp.rank, rank % 2, "tp rank")
check.equal(mesh.dp.rank, math.floor(rank / 2), "dp rank")
check.equal(mesh.dp_shard.size * mesh.cp.size, 1, "dp_shard and cp of size 1")
local t = accel.tensor({ 2 ^ rank })
mesh.tp:all_reduce(t)
check.near(t, { 2 ^ tp_first + 2 ^ (tp_first + 1) }, 0, "tp all_reduce sums its group only")
t = accel.tensor({ 2 ^ rank })
mesh.dp:all_reduce(t)
check.near(t, { 2 ^ dp_first + 2 ^ (dp_first + 2) }, 0, "dp all_reduce sums its group only")
check.near(accel.cat(mesh.dp:all_gather(accel.tensor({ rank })), 1), { dp_first, dp_first + 2 }, 0, "dp all_gather")
-- Gloo has no bfloat16 and no bool: a gather carries their bytes.
local halves = mesh.dp:all_gather(accel.tensor({ rank + 0.5 }):to("bfloat16"))
check.equal(halves[2].dtype, "bfloat16", "a bfloat16 all_gather keeps its dtype")
check.near(accel.cat(halves, 1):float(), { dp_first + 0.5, dp_first + 2.5 }, 0, "bfloat16 dp all_gather")
local flags = mesh.dp:all_gather(accel.tensor({ rank }):gt(1))
check.equal(flags[1].dtype, "bool", "a bool all_gather keeps its dtype")
check.equal(tostring(flags[1]:item()) .. tostring(flags[2]:item()), "falsetrue", "bool dp all_gather")
-- Through each group's own shared memory segment, or Gloo's TCP path when
-- the run turns shared memory off (ctest's lua.test_tensor_parallel_over_tcp).
local tcp_only = os.getenv("ACCEL_SHARED_MEMORY") == "0"
for _, name in ipairs({ "tp", "dp" }) do
  local counts = mesh[name].group:counts()
  check.truthy(counts.all_reduce > 0, name .. " group all-reduced")
  check.equal(counts.all_reduce_shared_memory > 0, not tcp_only, name .. " group's all-reduces went through shared memory")
end
if rank == 0 then print(string.format("tensor parallel x data parallel (4 ranks): %d checks passed", check.passed)) end
