-- nproc: 2
-- Training through a pipeline via the Accelerator at PP 2
-- (ParallelismConfig{pp_size = 2, pp_microbatches = 4}): prepare cuts a
-- small Llama into stages and returns this rank's, model{input_ids,
-- labels} defers, acc:backward(out.loss) runs the schedule. For GPipe,
-- 1F1B, Interleaved1F1B and InterleavedZeroBubble (2 stages per rank, its
-- weight gradients split from the input's), 10 AdamW steps with
-- clipping (which acts) give one process's losses (on both ranks),
-- gradient norms and weights within 1e-5 (float32), also accumulating
-- each step over 2 micro-steps, and with tied embeddings (their gradient
-- summed over two stages); fp16 alike (the loss scaled; an overflow on one
-- stage skips the step on both ranks); bf16 within measured tolerances
-- that lr x 1.1 exceeds; labels ignored unevenly over the micro-batches
-- give one process's loss and gradients (token-weighted); an evaluation
-- (model:eval(), or under accel.no_grad) runs the forwards alone and gives
-- one process's loss; the other stages' modules are collected once
-- prepare returns; an nn.Sequential with its loss_fn trains alike; and
-- what is not built is refused naming it.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local pipeline_check = dofile(arg[0]:match("(.*/)") .. "helpers/pipeline_check.lua")
local decoder_stages = require("accel.parallel.pipeline.decoder_stages")
local nn, F = accel.nn, accel.nn.functional

local ref = pipeline_check.reference(check)
local acc, model, base
for _, run in ipairs({ { schedule = "GPipe" }, { schedule = "1F1B" }, { schedule = "1F1B", accumulation = 2 },
                       { schedule = "Interleaved1F1B", virtual_stages = 2, accumulation = 2 },
                       { schedule = "InterleavedZeroBubble", virtual_stages = 2, accumulation = 2 },
                       { schedule = "Interleaved1F1B", virtual_stages = 2 } }) do  -- the last one's acc is used below
  acc, model, base = pipeline_check.train(check, ref, run)
end
local rank = acc.process_index

-- Tied embeddings: the weight in stage 1's embed_tokens (rank 0) and the
-- last stage's lm_head (rank 1), its gradient summed over the two, its
-- square counted once in the norm.
local tied_ref = pipeline_check.reference(check, { config = { tie_word_embeddings = true } })
for _, run in ipairs({ { schedule = "1F1B" }, { schedule = "Interleaved1F1B", virtual_stages = 2, accumulation = 2 } }) do
  local _, _, tied_base = pipeline_check.train(check, tied_ref, run)
  check.truthy(rawequal(tied_base.lm_head.weight, tied_base.model.embed_tokens.weight), "the weights stay tied")
end

-- fp16 on the CPU scales the loss only (by powers of two): float32's numbers.
pipeline_check.train(check, ref, { schedule = "1F1B", mixed_precision = "fp16" })
-- An fp16 overflow in rank 1's stage alone: both ranks skip the step and halve the scale.
do
  local fp16 = accel.Accelerator{ mixed_precision = "fp16",
    parallelism_config = accel.ParallelismConfig{ pp_size = 2, pp_microbatches = 4 } }
  local fp16_base = pipeline_check.tiny()
  local fp16_model, fp16_opt = fp16:prepare(fp16_base, accel.optim.AdamW(fp16_base:parameters(), { lr = 1e-2 }))
  pipeline_check.overflow_skips(check, fp16, fp16_model, fp16_opt, fp16_model:parameters()[1], pipeline_check.batch(1),
                                1, "fp16 PP 2")
end
-- bf16: the stages and the loss under autocast, against
-- one process under the same autocast, within the tolerances the mesh's
-- bf16 tests measured (docs/api/parallelism.md), on learnable rows at
-- lr 1e-3 (on random tokens at 1e-2 bf16's rounding alone moves single
-- weights as far as a 10% change of learning rate). The tolerances can
-- fail: one process at lr x 1.1 strays beyond them, and the loss falls by
-- more than 10 times the loss tolerance.
local BF16 = { loss = 5e-4, norm = 5e-3, weights = 2.5e-3 }
local bf16_ref = pipeline_check.reference(check, { precision = "bf16", lr = 1e-3, learnable = true })
pipeline_check.train(check, bf16_ref, { schedule = "1F1B", mixed_precision = "bf16", tolerances = BF16 })
pipeline_check.train(check, bf16_ref, { schedule = "Interleaved1F1B", virtual_stages = 2, mixed_precision = "bf16",
                                        tolerances = BF16 })
local stray = pipeline_check.reference(check, { precision = "bf16", lr = 1.1e-3, learnable = true })
local last = pipeline_check.STEPS
check.truthy(math.abs(stray.losses[last] - bf16_ref.losses[last]) > BF16.loss * bf16_ref.losses[last],
             "bf16: lr x 1.1 strays beyond the loss tolerance")
check.truthy(pipeline_check.relative_difference(stray.model, bf16_ref.model) > BF16.weights,
             "bf16: lr x 1.1 strays beyond the weights tolerance")
check.truthy(bf16_ref.losses[1] - bf16_ref.losses[last] > 10 * BF16.loss * bf16_ref.losses[1],
             "bf16: the loss falls by more than 10 times its tolerance")
check.equal(table.concat(model:layer_names(), ","), rank == 0 and "embed_tokens,layers.0,norm" or "layers.1,lm_head",
            "Interleaved1F1B v 2: stages 1 and 3 on rank 0, 2 and 4 on rank 1")

-- Evaluation: the forwards alone, one process's loss, no gradients.
local x = pipeline_check.batch(99)
local function reference_loss(labels)
  ref.model:eval()
  local loss = accel.no_grad(function() return ref.model{ input_ids = x, labels = labels }.loss end)
  ref.model:train()
  return loss:item()
end
model:eval()
local out = model{ input_ids = x, labels = x }
check.near(out.loss, reference_loss(x), 1e-5, "eval: out.loss runs the forward-only schedule")
for _, p in ipairs(model:parameters()) do check.truthy(p.grad == nil, "eval leaves no gradient") end
model:train()
check.near(accel.no_grad(function() return model{ input_ids = x, labels = x }.loss end), reference_loss(x), 1e-5,
           "under no_grad in training mode: the forwards alone")

-- Labels ignored unevenly over the micro-batches (-100 in one micro-batch's
-- rows only): the loss is token-weighted as one process's.
local labels = x:clone()
labels:narrow(1, 1, 4):narrow(2, 3, 5):fill_(-100)
out = model{ input_ids = x, labels = labels }
acc:backward(out.loss)
local ref_loss = ref.model{ input_ids = x, labels = labels }.loss
ref_loss:backward()
check.near(out.loss, ref_loss:item(), 1e-5, "labels ignored unevenly: one process's loss")
for _, name in ipairs(model:layer_names()) do
  pipeline_check.each_pair(decoder_stages.module(base, name), decoder_stages.module(ref.model, name), function(p, mine, theirs)
    check.near(mine.grad, theirs.grad, 1e-5, "labels ignored unevenly: " .. name .. "." .. p .. "'s gradient")
  end)
end
ref.model:zero_grad()
model:zero_grad()

-- Misuse, refused naming it.
out = model{ input_ids = x, labels = x }
check.raises(function() return out.logits end, "logits", "output holds only loss")
check.raises(function() model{ input_ids = x, labels = x } end, "a second call before backward",
             "the previous batch's out.loss was never given to acc:backward")
check.raises(function() acc:backward(out.loss * 2) end, "a loss computed from out.loss",
             "give acc:backward the out.loss itself")
acc:backward(out.loss)
check.raises(function() acc:backward(out.loss) end, "backward twice", "has already run its schedule")
model:zero_grad()
check.raises(function() model{ input_ids = x } end, "no labels", "needs input_ids and labels")
check.raises(function() model{ input_ids = x, labels = x, attention_mask = x } end, "attention_mask",
             "takes input_ids and labels (and num_items_in_batch), not attention_mask")
local odd = x:narrow(1, 1, 6)
out = model{ input_ids = odd, labels = odd }
check.raises(function() acc:backward(out.loss) end, "uneven micro-batches",
             "rows do not cut into pp_microbatches = 4 equal micro-batches")

local function pp2(options)
  local o = { pp_size = 2, pp_microbatches = 4 }
  for k, v in pairs(options or {}) do o[k] = v end
  return accel.ParallelismConfig(o)
end
check.raises(function() accel.Accelerator{ parallelism_config = pp2{ cp_size = 2 } } end, "cp_size",
             "pp_size = 2 with cp_size = 2 is not implemented yet", "dp_shard_size (FSDP), tp_size and ep_size only")
check.raises(function()
  accel.Accelerator{ parallelism_config = pp2(), fsdp_plugin = accel.FullyShardedDataParallelPlugin{} }
end, "fsdp_plugin over a dp_shard of 1", "pp_size = 2 with an fsdp_plugin and dp_shard_size = 1",
  "give dp_shard_size > 1 for FSDP on each stage")
check.raises(function() accel.Accelerator{ parallelism_config = pp2(), zero_stage = 2 } end, "zero_stage",
             "pp_size = 2 with zero_stage (DeepSpeed)")
local fresh = accel.Accelerator{ parallelism_config = pp2() }
check.raises(function() fresh:prepare(pipeline_check.tiny{ model_type = "qwen2", tie_word_embeddings = false,
                                                           sliding_window = 4, use_sliding_window = true,
                                                           max_window_layers = 0 }) end,
             "sliding windows", "sliding window")
check.raises(function() fresh:prepare(nn.Linear(4, 4)) end, "not a pipeline's kind of model",
             "a causal LM (model_type gpt2, llama, mistral, mixtral, qwen2) or an nn.Sequential", "a Linear is neither")
check.raises(function() fresh:prepare(nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))) end, "Sequential's loss",
             "set model.loss_fn = function(output, labels)")

-- Once prepare returns, a rank's pipelined model reaches its own stages'
-- modules only: with the optimizer made after prepare, the rest of the
-- model the rank built is collected.
do
  local lean = accel.Accelerator{ parallelism_config = pp2() }
  local whole = pipeline_check.tiny()
  local others = setmetatable({ rank == 0 and whole.lm_head or whole.model.embed_tokens, whole }, { __mode = "v" })
  local lean_model = lean:prepare(whole)
  whole = nil
  local lean_opt = lean:prepare(accel.optim.AdamW(lean_model:parameters(), { lr = 1e-2 }))
  jit.flush()  -- compiled traces keep the objects they were specialised on
  collectgarbage()
  collectgarbage()
  check.truthy(others[1] == nil and others[2] == nil, "the other stage's modules and the whole model are collected")
  check.equal(#lean_opt.optimizer:params(), #lean_model:parameters(), "the optimizer holds this rank's stages only")
end

-- An nn.Sequential of 4 layers through 1F1B with its loss_fn: 5 AdamW
-- steps give one process's losses and weights.
local function sequential()
  accel.set_seed(7)
  local seq = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 12), nn.Linear(12, 3))
  seq.loss_fn = function(output, target) return F.mse_loss(output, target) end
  return seq
end
local seq_acc = accel.Accelerator{ parallelism_config = pp2() }
local seq_base, seq_ref = sequential(), sequential()
local seq_model, seq_opt = seq_acc:prepare(seq_base, accel.optim.AdamW(seq_base:parameters(), { lr = 1e-2 }))
local seq_ref_opt = accel.optim.AdamW(seq_ref:parameters(), { lr = 1e-2 })
for step = 1, 5 do
  accel.manual_seed(1000 + step)
  local input, target = accel.randn({ 8, 6 }), accel.randn({ 8, 3 })
  local seq_out = seq_model{ input = input, labels = target }
  seq_acc:backward(seq_out.loss)
  seq_opt:step(); seq_opt:zero_grad()
  local loss = F.mse_loss(seq_ref(input), target)
  loss:backward()
  seq_ref_opt:step(); seq_ref_opt:zero_grad()
  check.near(seq_out.loss, loss:item(), 1e-5, "Sequential: step " .. step .. "'s loss")
end
check.equal(table.concat(seq_model:layer_names(), ","), rank == 0 and "1,2" or "3,4", "Sequential: 2 layers a stage")
for _, name in ipairs(seq_model:layer_names()) do
  pipeline_check.each_pair(seq_base[tonumber(name)], seq_ref[tonumber(name)], function(p, mine, theirs)
    check.near(mine, theirs, 1e-5, "Sequential: layer " .. name .. "." .. p .. " after 5 steps")
  end)
end
check.done("pipeline accelerator")
