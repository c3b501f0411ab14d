-- nproc: 4
-- PP 2 x FSDP 2 through the Accelerator (ParallelismConfig{pp_size = 2,
-- dp_shard_size = 2}): ranks {0, 1} hold stage 1 and {2, 3} stage 2, each
-- pair shards its stages FULL_SHARD over its dp_shard group; every
-- micro-batch's backward reduce-scatters into the slices, the slices are
-- divided by dp once the schedule has run, and clipping takes the norm
-- over the slices of both stages. For GPipe, 1F1B, Interleaved1F1B and
-- InterleavedZeroBubble (2 stages per rank; each W gathers its stage's
-- units again and its gradients are reduce-scattered after it, not after
-- B), with the stages whole or their decoder layers wrapped one by one,
-- with and without accumulating over 2 micro-steps, 10 AdamW steps with
-- clipping (which acts) of a small Llama give one process's losses,
-- gradient norms and weights within 1e-5 (float32); tied embeddings alike
-- (their slices summed over the two stages); each rank
-- holds half its stages' weights and optimizer state, its parameters
-- empty between steps; an fp16 overflow in one rank's slice skips the step
-- on all four; save_model writes one process's model, which load_model
-- reads back into the shards; save_state's checkpoints (a pipeline's: the
-- whole model's names) resume alike, mid-accumulation too, and load
-- across PP x FSDP and PP x DP; a small Mixtral alike (1F1B); what is not
-- built is refused naming it.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local pipeline_check = dofile(arg[0]:match("(.*/)") .. "helpers/pipeline_check.lua")

local by_layer = accel.FullyShardedDataParallelPlugin{ transformer_layer_cls = "LlamaDecoderLayer" }

-- The number of elements of each of the whole model's parameters, by name.
local numel_of = pipeline_check.numels()

-- What a rank holds after training: the flat shards are half of its
-- stages' parameters (up to padding), the optimizer keeps state of the
-- shards' size only, the stages' parameters are empty between steps, and
-- each micro-batch's backward reduce-scattered every flat parameter over
-- dp_shard.
local function holds_half(acc, model, opt, run, what)
  local mesh = acc.mesh
  local sharded = acc._models[1].sharded
  check.equal(sharded:stage(), 3, what .. ": FULL_SHARD")
  check.equal(acc.distributed_type, "FSDP", what .. ": distributed_type")
  local flats = sharded:flat_parameters(opt.optimizer).flats
  local total, shard_total = 0, 0
  for k, flat in ipairs(flats) do
    check.equal(flat.shards, 2, string.format("%s: flat %d's shards span dp_shard", what, k))
    check.equal(flat.shard_rank, mesh.dp_shard.rank, string.format("%s: this rank's shard of flat %d", what, k))
    check.equal(flat.shard_numel, math.ceil(flat.numel / 2), string.format("%s: flat %d's shard is half", what, k))
    total, shard_total = total + flat.numel, shard_total + flat.shard_numel
  end
  local stage_numel = 0
  for name, p in model:named_parameters() do
    stage_numel = stage_numel + numel_of[model.pipeline.names.stage[name]]
    check.equal(p:numel(), 0, what .. ": " .. name .. " is released between steps")
  end
  check.equal(total, stage_numel, what .. ": the flat parameters hold this rank's stages")
  local state = 0
  for key, t in pairs(opt.optimizer:state_dict()) do
    if key:match("^state%.%d+%.exp_avg$") then state = state + t:numel() end
  end
  check.equal(state, shard_total, what .. ": AdamW's exp_avg is the shards' size")
  local backwards = pipeline_check.STEPS * (run.accumulation or 1) * 4
  check.equal(mesh.dp_shard.group:counts().reduce_scatter, backwards * #flats,
              what .. ": each micro-batch's backward reduce-scatters every flat parameter")
end

local ref = pipeline_check.reference(check)
local acc, model, opt
for _, run in ipairs({ { schedule = "GPipe", dp_shard = 2 },
                       { schedule = "1F1B", dp_shard = 2 },
                       { schedule = "1F1B", dp_shard = 2, accumulation = 2, fsdp_plugin = by_layer },
                       { schedule = "Interleaved1F1B", virtual_stages = 2, dp_shard = 2, fsdp_plugin = by_layer },
                       { schedule = "InterleavedZeroBubble", virtual_stages = 2, dp_shard = 2, fsdp_plugin = by_layer },
                       { schedule = "InterleavedZeroBubble", virtual_stages = 2, dp_shard = 2, accumulation = 2 },
                       { schedule = "Interleaved1F1B", virtual_stages = 2, dp_shard = 2, accumulation = 2 } }) do
  acc, model = pipeline_check.train(check, ref, run)
  opt = acc._optimizers[1]
  holds_half(acc, model, opt, run, run.schedule .. " v" .. (run.virtual_stages or 1))
end
local mesh, rank = acc.mesh, acc.process_index
check.equal(table.concat(mesh.dp_shard.ranks, ","), rank < 2 and "0,1" or "2,3", "dp_shard: the pair holding a stage")
check.equal(table.concat(mesh.pp.ranks, ","), (rank % 2) .. "," .. (rank % 2 + 2), "pp: one rank per stage")
check.equal(mesh.dp.size, 2, "dp = dp_replicate x dp_shard")

-- Tied embeddings: the weight a unit alone on the first and last stages'
-- ranks, its slices summed over pp, counted once in the norm.
local tied_ref = pipeline_check.reference(check, { config = { tie_word_embeddings = true } })
for _, run in ipairs({ { schedule = "1F1B", dp_shard = 2 },
                       { schedule = "Interleaved1F1B", virtual_stages = 2, dp_shard = 2, accumulation = 2,
                         fsdp_plugin = by_layer },
                       { schedule = "InterleavedZeroBubble", virtual_stages = 2, dp_shard = 2, fsdp_plugin = by_layer } }) do
  local _, _, tied_base = pipeline_check.train(check, tied_ref, run)
  check.truthy(rawequal(tied_base.lm_head.weight, tied_base.model.embed_tokens.weight), "the weights stay tied")
end

-- fp16 on the CPU scales the loss only: float32's numbers.
pipeline_check.train(check, ref, { schedule = "1F1B", dp_shard = 2, mixed_precision = "fp16" })
-- An overflow in rank 3's slice alone: all four ranks skip the step.
do
  local fp16 = accel.Accelerator{ mixed_precision = "fp16",
    parallelism_config = accel.ParallelismConfig{ pp_size = 2, dp_shard_size = 2, pp_microbatches = 4 } }
  local base = pipeline_check.tiny()
  local fp16_model, fp16_opt = fp16:prepare(base, accel.optim.AdamW(base:parameters(), { lr = 1e-2 }))
  local ids = pipeline_check.batch(1):narrow(1, fp16.mesh.dp.rank * 8 + 1, 8)
  pipeline_check.overflow_skips(check, fp16, fp16_model, fp16_opt, fp16._models[1].sharded:shards()[1], ids, 3,
                                "fp16 PP x FSDP")
end

-- save_model gathers the stages' shards and writes the whole model as one
-- process would; load_model gives each rank's shards their part of it.
local root = os.getenv("ACCEL_TEST_TMPDIR") or "/tmp"
local folder = acc:gather_object(string.format("%s/pipeline_fsdp_%d_%d", root, os.time(), math.random(1e9)))[1]
acc:save_model(model, folder)
local saved = acc:get_state_dict(model)
local fresh_acc = accel.Accelerator{ parallelism_config = accel.ParallelismConfig{
  pp_size = 2, dp_shard_size = 2, pp_schedule = "Interleaved1F1B", pp_microbatches = 4, pp_virtual_stages = 2 } }
local fresh_base = pipeline_check.tiny()
local fresh = fresh_acc:prepare(fresh_base, accel.optim.AdamW(fresh_base:parameters(), { lr = 1e-2 }))
fresh_acc:load_model(fresh, folder)
local loaded = fresh_acc:get_state_dict(fresh)
for name, t in pairs(saved) do check.near(loaded[name], t, 0, "load_model under PP x FSDP: " .. name) end
check.truthy(fresh_acc._models[1].sharded:shards()[1]:numel() > 0, "load_model: the shards hold the weights")

-- Checkpoints: tied embeddings trained 6 steps of 2 micro-steps, saved
-- mid-accumulation (after step 3's first micro-step: the summed slices are
-- saved too) and at step 4; a fresh Accelerator on a model from other
-- weights loads each and trains on to the uninterrupted run's losses and
-- weights. The files are a pipeline's (the whole model's names, each pp
-- rank's stages), so step 4's loads at PP 2 x DP 2, and a PP 2 x DP 2
-- checkpoint loads at PP 2 x FSDP 2, both training on alike.
do
  local STEPS, ACCUMULATION, TOL = 6, 2, 1e-6
  local function setup(seed, sizes)
    local run = { acc = accel.Accelerator{ gradient_accumulation_steps = ACCUMULATION,
      parallelism_config = accel.ParallelismConfig{ pp_size = 2, dp_shard_size = sizes.dp_shard or 1,
                                                    dp_replicate_size = sizes.dp or 1, pp_microbatches = 4 } } }
    local base = pipeline_check.tiny({ tie_word_embeddings = true })
    if seed ~= 1 then
      accel.set_seed(seed)
      base = accel.models.from_config(base.config):train()
    end
    run.model, run.opt = run.acc:prepare(base, accel.optim.AdamW(base:parameters(), { lr = 1e-2, weight_decay = 0.01 }))
    return run
  end
  local schedule = { steps = STEPS, accumulation = ACCUMULATION, max_norm = 0.5 }
  local fsdp, ddp = { dp_shard = 2 }, { dp = 2 }
  pipeline_check.save_and_resume(check, {
    setup = setup, schedule = schedule, tol = TOL, folder = folder,
    names = { [fsdp] = "PP 2 x FSDP 2", [ddp] = "PP 2 x DP 2" },
    savings = { { fsdp, "fsdp", { { "mid", 6, fsdp }, { "step4", 9, fsdp }, { "step4", 9, ddp } } },
                { ddp, "ddp", { { "step4", 9, fsdp } } } } })
end
acc:wait_for_everyone()
if rank == 0 then os.execute("rm -rf '" .. folder .. "'") end

-- A small Mixtral (4 experts, top 2), its experts inside the stages'
-- units: each micro-batch runs every expert, on no rows too, so that each
-- unit has all its gradients in every backward (pipeline_fsdp.lua).
local MIXTRAL = { model_type = "mixtral", vocab_size = 32, hidden_size = 16, intermediate_size = 16,
                  num_hidden_layers = 2, num_attention_heads = 4, num_key_value_heads = 2, num_local_experts = 4,
                  num_experts_per_tok = 2 }
pipeline_check.train(check, pipeline_check.reference(check, { base = MIXTRAL }), { schedule = "1F1B", dp_shard = 2 })

-- Refused, naming the sizes.
check.raises(function()
  accel.Accelerator{ parallelism_config = accel.ParallelismConfig{ pp_size = 2, dp_replicate_size = 2 },
                     fsdp_plugin = by_layer }
end, "an fsdp_plugin over a dp_shard of 1", "pp_size = 2 with an fsdp_plugin and dp_shard_size = 1")
check.raises(function()
  accel.Accelerator{ parallelism_config = accel.ParallelismConfig{ pp_size = 2, dp_shard_size = 2 },
                     fsdp_plugin = accel.FullyShardedDataParallelPlugin{ sharding_strategy = "SHARD_GRAD_OP" } }
end, "SHARD_GRAD_OP under PP x FSDP", "sharding_strategy SHARD_GRAD_OP with dp_shard_size > 1 is not implemented")
check.done("pipeline pp x fsdp")
