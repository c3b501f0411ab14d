-- nproc: 4
-- PP 2 x DP 2 through the Accelerator (ParallelismConfig{pp_size = 2,
-- dp_replicate_size = 2}): ranks {0, 1} hold stage 1 and {2, 3} stage 2,
-- each step's batch is cut over the dp pair, the gradients are averaged
-- over the pair holding a stage once the schedule has run, and clipping
-- takes the norm across the stages. For 1F1B, Interleaved1F1B and
-- InterleavedZeroBubble (2 stages per rank), with and without accumulating
-- over 2 micro-steps, 10 AdamW
-- steps with clipping (which acts) of a small Llama give one process's
-- losses, gradient norms and weights within 1e-5 (float32); the dp pair of
-- a stage ends with equal weights; tied embeddings alike.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local pipeline_check = dofile(arg[0]:match("(.*/)") .. "helpers/pipeline_check.lua")

local ref = pipeline_check.reference(check)
local acc, model
for _, run in ipairs({ { schedule = "1F1B", dp = 2 }, { schedule = "1F1B", dp = 2, accumulation = 2 },
                       { schedule = "GPipe", dp = 2 },
                       { schedule = "InterleavedZeroBubble", virtual_stages = 2, dp = 2, accumulation = 2 },
                       { schedule = "Interleaved1F1B", virtual_stages = 2, dp = 2, accumulation = 2 } }) do
  acc, model = pipeline_check.train(check, ref, run)
end
-- Tied embeddings: the gradient averaged over dp, then summed over the stages.
pipeline_check.train(check, pipeline_check.reference(check, { config = { tie_word_embeddings = true } }),
                     { schedule = "1F1B", dp = 2, accumulation = 2 })
local mesh, rank = acc.mesh, acc.process_index
check.equal(table.concat(mesh.dp.ranks, ","), rank < 2 and "0,1" or "2,3", "dp: the pair holding the same stages")
check.equal(table.concat(mesh.pp.ranks, ","), (rank % 2) .. "," .. (rank % 2 + 2), "pp: one rank per stage")
for i, p in ipairs(model:parameters()) do
  local copies = mesh.dp:all_gather(p:detach():contiguous())
  check.near(copies[1], copies[2], 0, string.format("parameter %d equal on both ranks of the dp pair", i))
end
check.done("pipeline pp x dp")
