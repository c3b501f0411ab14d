-- nproc: 2
-- The pretrained architectures beyond the Llama family cut into stages
-- by the Accelerator at PP 2 (4 micro-batches): a tiny Mixtral (3 decoder
-- layers of 4 experts, top 2: accel.parallel.pipeline.mixtral_stages) and
-- a tiny GPT-2 (wte, wpe, 2 blocks, ln_f and lm_head tied to wte, dropout
-- off: gpt2_stages), each through GPipe, 1F1B and Interleaved1F1B (2
-- stages per rank), 10 AdamW steps with clipping (which acts): one
-- process's losses (on both ranks), gradient norms and weights within 1e-5
-- (float32). GPT-2's tied weight sits in stage 1's wte (rank 0) and the
-- last stage's lm_head (rank 1), its gradient summed over the two; a
-- save_state after its 5th step under 1F1B, loaded by a model built from
-- other weights, resumes exactly: one process's losses, and the weights of
-- the run that went on bit for bit. A Mixtral with output_router_logits
-- (its load-balancing loss) is refused naming it, so are the architectures
-- not cut.
local here = arg[0]:match("(.*/)")
local check = dofile(here .. "helpers/check.lua")
local pipeline_check = dofile(here .. "helpers/pipeline_check.lua")
local mc = dofile(here .. "helpers/mesh_checkpoint_check.lua")
local ck = require("accel.core").formats

local V = pipeline_check.TINY.vocab_size
local MIXTRAL = { model_type = "mixtral", vocab_size = V, hidden_size = 16, intermediate_size = 16,
                  num_hidden_layers = 3, num_attention_heads = 4, num_key_value_heads = 2, num_local_experts = 4,
                  num_experts_per_tok = 2 }
local GPT2 = { model_type = "gpt2", vocab_size = V, n_embd = 16, n_layer = 2, n_head = 2, n_positions = 16,
               resid_pdrop = 0, embd_pdrop = 0, attn_pdrop = 0 }
local SCHEDULES = { { schedule = "GPipe" }, { schedule = "1F1B" },
                    { schedule = "Interleaved1F1B", virtual_stages = 2 } }

local acc0 = accel.Accelerator{}
local rank = acc0.process_index
local root = os.getenv("ACCEL_TEST_TMPDIR") or "/tmp"
local work = acc0:gather_object(string.format("%s/pipeline_architectures_%d_%d", root, os.time(),
                                              math.random(1e9)))[1]

-- Each schedule against one process; the layers of each rank's stages.
local function each_schedule(ref, layers)
  for _, run in ipairs(SCHEDULES) do
    local _, model = pipeline_check.train(check, ref, run)
    local expected = layers[run.virtual_stages or 1][rank + 1]
    check.equal(table.concat(model:layer_names(), ","), expected,
                string.format("%s %s: rank %d's layers", ref.base.model_type, run.schedule, rank))
  end
end

-- lr 3e-3: at 1e-2 one process alone, accumulating the 4 micro-batches,
-- strays from its whole-batch self by more than 1e-5 within 10 steps, as
-- AdamW divides near-zero gradients by their square roots (plus eps 1e-8)
-- and so steps on float32's rounding: Mixtral's step 10 norm by 1.8e-5,
-- GPT-2's key biases (whose gradient is zero but for rounding: they add a
-- constant to a query's scores) by 4.3e-5. At 3e-3, measured: weights by
-- 1.4e-6 (Mixtral) and 2e-6 (GPT-2), norms by 1e-7.
local LR = 3e-3
each_schedule(pipeline_check.reference(check, { base = MIXTRAL, lr = LR }), {
  { "embed_tokens,layers.0,layers.1", "layers.2,norm,lm_head" },
  { "embed_tokens,layers.0,norm", "layers.1,layers.2,lm_head" },
})

local gpt2_ref = pipeline_check.reference(check, { base = GPT2, lr = LR })
check.truthy(rawequal(gpt2_ref.model.lm_head.weight, gpt2_ref.model.transformer.wte.weight),
             "GPT-2's lm_head is tied to wte")
each_schedule(gpt2_ref, {
  { "wte,wpe,h.0", "h.1,ln_f,lm_head" },
  { "wte,wpe,ln_f", "h.0,h.1,lm_head" },
})

-- save_state after step 5 of 1F1B; a model from other weights loads it and
-- trains steps 6 to 10 (against one process's, in train), ending where the
-- run that went on ends.
local dir = work .. "/gpt2"
local acc, model, base = pipeline_check.train(check, gpt2_ref, { schedule = "1F1B", save = { dir, step = 5 } })
check.truthy(rawequal(base.lm_head.weight, base.transformer.wte.weight), "GPT-2's weights stay tied")
local reader = ck.open_weights(string.format("%s/model_rank_%d.safetensors", dir, rank))
local own = {}
for _, name in ipairs(reader:names()) do own[name] = true end
reader:close()
check.truthy(own["transformer.wte.weight"] and not own["lm_head.weight"],
             string.format("rank %d writes the tied weight under its one name", rank))
check.truthy(own[rank == 0 and "transformer.wpe.weight" or "transformer.ln_f.weight"]
             and not own[rank == 0 and "transformer.ln_f.weight" or "transformer.wpe.weight"],
             string.format("rank %d's file holds its stages' tensors only, under the whole model's names", rank))
local resumed_acc, resumed = pipeline_check.train(check, gpt2_ref, { schedule = "1F1B", resume = { dir, step = 5 } })
mc.same_state(check, resumed_acc:get_state_dict(resumed), acc:get_state_dict(model), 0,
              "GPT-2 resumed after step 5 against the run that went on")

-- Refused, naming the setting or the architecture.
local function pp2() return accel.Accelerator{ parallelism_config = accel.ParallelismConfig{ pp_size = 2,
                                                                                            pp_microbatches = 4 } } end
check.raises(function() pp2():prepare(pipeline_check.tiny({ output_router_logits = true }, MIXTRAL)) end,
             "Mixtral's load-balancing loss", "output_router_logits = true", "set output_router_logits = false")
check.raises(function()
  pp2():prepare(accel.models.from_config{ model_type = "bert", vocab_size = V, hidden_size = 16, num_hidden_layers = 2,
                                          num_attention_heads = 2, intermediate_size = 32 })
end, "bert", "cuts the causal LMs of model_type gpt2, llama, mistral, mixtral, qwen2 into stages",
     "a BertModel (model_type bert) is not cut yet")
acc0:wait_for_everyone()
if rank == 0 then ck.remove_folder(work) end
check.done("pipeline architectures")
