-- nproc: 8
-- PP 2 x TP 2 x FSDP 2 through the Accelerator (ParallelismConfig{pp_size
-- = 2, dp_shard_size = 2, tp_size = 2}): the recipe makes the model tensor
-- parallel, prepare cuts it into stages, and each rank shards its tp
-- slices of its stages FULL_SHARD over its dp_shard pair (ranks 0-3 hold
-- stage 1: tp pairs {0, 1} {2, 3}, dp_shard pairs {0, 2} {1, 3}). GPipe,
-- 1F1B with accumulation over 2 micro-steps and its decoder layers wrapped
-- one by one, InterleavedZeroBubble (2 stages per rank, its W after B)
-- wrapped alike, and Interleaved1F1B (2 stages per rank) with a
-- vocabulary-parallel head: 10 AdamW steps with clipping (which acts: the
-- norm sums the split flat parameters' slices over dp_shard and tp, the
-- others' over dp_shard, then the stages' over pp) of a small Llama give
-- one process's losses, gradient norms and full weights
-- (acc:get_state_dict) within 1e-5 (float32); each rank holds half its tp
-- slices. save_state's checkpoints (a pipeline's, gathered over dp_shard
-- and tp) resume exactly on the same mesh, mid-accumulation too, and at
-- PP 2 x TP 2 x DP 2.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local pipeline_check = dofile(arg[0]:match("(.*/)") .. "helpers/pipeline_check.lua")

local by_layer = accel.FullyShardedDataParallelPlugin{ transformer_layer_cls = "LlamaDecoderLayer" }
local vocab_parallel = pipeline_check.vocab_parallel_plan()

local ref = pipeline_check.reference(check)
local acc
for _, run in ipairs({ { schedule = "GPipe", tp = 2, dp_shard = 2 },
                       { schedule = "1F1B", tp = 2, dp_shard = 2, accumulation = 2, fsdp_plugin = by_layer },
                       { schedule = "InterleavedZeroBubble", virtual_stages = 2, tp = 2, dp_shard = 2,
                         fsdp_plugin = by_layer },
                       { schedule = "Interleaved1F1B", virtual_stages = 2, tp = 2, dp_shard = 2,
                         plan = vocab_parallel } }) do
  local model
  acc, model = pipeline_check.train(check, ref, run)
  pipeline_check.holds_half_slices(check, acc, model, run.schedule)
end
local mesh, rank = acc.mesh, acc.process_index
check.equal(table.concat(mesh.tp.ranks, ","), (rank - rank % 2) .. "," .. (rank - rank % 2 + 1), "tp: neighbours")
check.equal(table.concat(mesh.dp_shard.ranks, ","), (rank - rank % 4 + rank % 2) .. "," .. (rank - rank % 4 + rank % 2 + 2),
            "dp_shard: the ranks of a stage with the same tp rank")
check.equal(table.concat(mesh.pp.ranks, ","), (rank % 4) .. "," .. (rank % 4 + 4), "pp: one rank per stage")

-- Checkpoints: 6 steps of 2 micro-steps, saved mid-accumulation (after
-- step 3's first micro-step) and at step 4; a fresh Accelerator on a model
-- from other weights loads each and trains on to the uninterrupted run's
-- losses and weights, on the same mesh and (step 4's) at PP 2 x TP 2 x DP 2
-- (plain data parallel on each stage).
do
  local STEPS, ACCUMULATION = 6, 2
  local fsdp, ddp = { dp_shard = 2 }, { dp = 2 }
  local function setup(seed, sizes)
    local run = { acc = accel.Accelerator{ gradient_accumulation_steps = ACCUMULATION,
      parallelism_config = accel.ParallelismConfig{ pp_size = 2, tp_size = 2, dp_shard_size = sizes.dp_shard or 1,
                                                    dp_replicate_size = sizes.dp or 1, pp_microbatches = 4 } } }
    local base = accel.parallel.tensor_parallel(pipeline_check.tiny(nil, nil, seed), run.acc.mesh)
    run.model, run.opt = run.acc:prepare(base, accel.optim.AdamW(base:parameters(), { lr = 1e-2, weight_decay = 0.01 }))
    return run
  end
  local schedule = { steps = STEPS, accumulation = ACCUMULATION, max_norm = 0.5 }
  local root = os.getenv("ACCEL_TEST_TMPDIR") or "/tmp"
  local dir = acc:gather_object(string.format("%s/pipeline_tp_fsdp_%d_%d", root, os.time(), math.random(1e9)))[1]
  pipeline_check.save_and_resume(check, {
    setup = setup, schedule = schedule, tol = 1e-6, folder = dir,
    names = { [fsdp] = "PP 2 x TP 2 x FSDP 2", [ddp] = "PP 2 x TP 2 x DP 2" },
    savings = { { fsdp, "fsdp", { { "mid", 6, fsdp }, { "step4", 9, fsdp }, { "step4", 9, ddp } } } } })
  acc:wait_for_everyone()
  if rank == 0 then os.execute("rm -rf '" .. dir .. "'") end
end
check.done("pipeline pp x tp x fsdp")
