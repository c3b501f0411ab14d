-- nproc: 8
-- PP 2 x HSDP 2 x 2 through the Accelerator (ParallelismConfig{pp_size = 2,
-- dp_replicate_size = 2, dp_shard_size = 2}): each stage sharded over its
-- dp_shard pair and replicated over dp_replicate, the slices averaged over
-- the four data-parallel ranks of a stage. 1F1B, Interleaved1F1B and
-- InterleavedZeroBubble (its W after B, FSDP's units gathered again), tied
-- embeddings too (their slices summed over pp after the replicas'
-- average): 10 AdamW steps with clipping give one process's losses,
-- gradient norms and weights within 1e-5 (float32); the replicas of a
-- shard end equal.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local pipeline_check = dofile(arg[0]:match("(.*/)") .. "helpers/pipeline_check.lua")

local ref = pipeline_check.reference(check)
local tied_ref = pipeline_check.reference(check, { config = { tie_word_embeddings = true } })
for _, case in ipairs({ { ref, { schedule = "1F1B", dp = 2, dp_shard = 2 } },
                        { ref, { schedule = "Interleaved1F1B", virtual_stages = 2, dp = 2, dp_shard = 2 } },
                        { ref, { schedule = "InterleavedZeroBubble", virtual_stages = 2, dp = 2, dp_shard = 2 } },
                        { tied_ref, { schedule = "1F1B", dp = 2, dp_shard = 2 } } }) do
  local acc = pipeline_check.train(check, case[1], case[2])
  local mesh = acc.mesh
  check.equal(mesh.dp.size, 4, "dp = dp_replicate x dp_shard")
  for k, shard in ipairs(acc._models[1].sharded:shards()) do
    local replicas = mesh.dp_replicate:all_gather(shard:detach())
    check.near(replicas[2], replicas[1], 0, string.format("%s: flat %d's shard equal on both replicas",
                                                          case[2].schedule, k))
  end
end
check.done("pipeline pp x hsdp")
