-- nproc: 2
-- Tensor parallelism over 2 ranks (accel.ParallelismConfig{tp_size = 2})
-- trains a small Llama as one process does, within 1e-5 for 10 AdamW steps
-- with clipping: once with the vocabulary kept split to the loss
-- (lm_head "colwise", accel.parallel.vocab_parallel_cross_entropy: no rank
-- holds full logits), once with llama's own plan (logits gathered,
-- F.cross_entropy), and with each step's gradient accumulated over 2
-- micro-steps. The mesh's facts and a tp group's collectives; sizes
-- the mesh refuses, with errors naming the sizes and the world size.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local tp_check = dofile(arg[0]:match("(.*/)") .. "helpers/tensor_parallel_check.lua")

-- Sizes refused before any group is made.
local function refused(config, ...)
  check.raises(function() accel.Accelerator{ parallelism_config = accel.ParallelismConfig(config) } end,
               "ParallelismConfig refused", ...)
end
refused({ tp_size = 4 }, "multiply to 4", "tp_size = 4", "world has 2 ranks")
refused({ tp_size = 2, dp_replicate_size = 2 }, "multiply to 4", "dp_replicate_size = 2", "world has 2 ranks")
refused({ tp_size = 0, dp_replicate_size = 2 }, "positive integer", "tp_size = 0")
refused({ tp_size = -2, dp_replicate_size = -1 }, "positive integer", "tp_size = -2", "dp_replicate_size = -1")
check.raises(function() accel.ParallelismConfig{ tp_size = 1.5 } end, "fractional size", "tp_size must be a whole number, got 1.5")
check.raises(function() accel.ParallelismConfig{ tp = 2 } end, "unknown key", "unknown option 'tp'", "tp_size")
check.raises(function() accel.ParallelismConfig{ tp_size = "2" } end, "a string", "'tp_size' must be a number")
check.raises(function() accel.Accelerator{ parallelism_config = { tp_size = 2 } } end, "a plain table",
             "parallelism_config must be made by accel.ParallelismConfig")

-- The mesh of tp 2: both ranks in one tp group, each alone along dp.
local acc = accel.Accelerator{ parallelism_config = accel.ParallelismConfig{ tp_size = 2 } }
local rank = acc.process_index
check.equal(acc.mesh.tp.rank, rank, "tp rank")
check.equal(acc.mesh.tp.size, 2, "tp size")
check.equal(table.concat(acc.mesh.tp.ranks, ","), "0,1", "tp group")
check.equal(acc.mesh.dp.size, 1, "dp size")
check.equal(table.concat(acc.mesh.dp.ranks, ","), tostring(rank), "dp group")
local t = accel.tensor({ rank + 1, 10 * (rank + 1) })
acc.mesh.tp:all_reduce(t)
check.near(t, { 3, 30 }, 0, "tp all_reduce")
local parts = acc.mesh.tp:all_gather(accel.tensor({ rank }))
check.near(accel.cat(parts, 1), { 0, 1 }, 0, "tp all_gather")
local out = accel.zeros(2)
acc.mesh.tp:reduce_scatter(out, accel.tensor({ 1, 2, 3, 4 }) * (rank + 1))
check.near(out, rank == 0 and { 3, 6 } or { 9, 12 }, 0, "tp reduce_scatter")

-- A plan that splits heads unevenly is refused, naming heads and tp_size.
local odd = {}
for k, v in pairs(tp_check.tiny) do odd[k] = v end
odd.num_attention_heads, odd.num_key_value_heads, odd.hidden_size = 2, 1, 16
check.raises(function() accel.parallel.tensor_parallel(accel.models.from_config(odd), acc.mesh) end,
             "one kv head over 2 ranks", "k_proj has 1 heads of 8 over tp_size 2")
check.raises(function() accel.parallel.tensor_parallel(accel.models.from_config(tp_check.tiny), acc.mesh, { nope = "colwise" }) end,
             "a plan entry matching nothing", "plan entry 'nope' matches no module")
check.raises(function() accel.parallel.tensor_parallel(accel.models.from_config(tp_check.tiny), acc.mesh, { lm_head = "diagonal" }) end,
             "an unknown kind", "the kind must be one of colwise, colwise_gather,", "rowwise,", "vocab_embedding")

tp_check.run(check, { dp_replicate = 1, tp = 2, plan = "vocab_parallel" })
tp_check.run(check, { dp_replicate = 1, tp = 2, plan = "default" })
tp_check.run(check, { dp_replicate = 1, tp = 2, plan = "vocab_parallel", accumulation = 2 })
-- The other Llama-family architectures with the plans they carry: Qwen2's
-- q/k/v biases split with their rows, Mistral's sliding window within each
-- rank's heads, Mixtral's experts split as MLPs (w1, w3 column-, w2
-- row-parallel) behind the router every rank keeps whole.
tp_check.run(check, { tp = 2, plan = "default", config = { model_type = "qwen2" }, name = "qwen2" })
tp_check.run(check, { tp = 2, plan = "default", config = { model_type = "mistral", sliding_window = 4 }, name = "mistral" })
tp_check.run(check, { tp = 2, plan = "default", name = "mixtral",
                      config = { model_type = "mixtral", num_local_experts = 4, num_experts_per_tok = 2 } })
if rank == 0 then print(string.format("tensor parallel (2 ranks): %d checks passed", check.passed)) end
