-- nproc: 2
-- Evaluation and generation through a pipeline at PP 2 (1F1B, and
-- Interleaved1F1B with 2 stages per rank), against one process's model
-- built alike: in evaluation (model:eval(), or under accel.no_grad)
-- model{input_ids = x} gives out.logits, [B, T, vocab] on both ranks,
-- equal to one process's within 1e-5, and with labels out.loss too;
-- model:generate gives one process's greedy tokens exactly on both ranks
-- (8 new tokens; a batch of 3 rows under 4 micro-batches, filled; an eos
-- stopping early with min_new_tokens and a repetition penalty); sampled
-- tokens agree over the ranks; a tied Llama alike; an nn.Sequential's
-- out.output; and what is not built is refused naming it.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local pipeline_check = dofile(arg[0]:match("(.*/)") .. "helpers/pipeline_check.lua")
local nn, F = accel.nn, accel.nn.functional

local x = pipeline_check.batch(99)          -- 16 rows of 8 tokens
local prompt = x:narrow(1, 1, 3):narrow(2, 1, 5)
local NEW = 8

-- One process's logits, loss and greedy tokens (eval mode).
local function reference(config)
  local ref = pipeline_check.tiny(config):eval()
  local out = accel.no_grad(function() return ref{ input_ids = x, labels = x } end)
  local tokens = ref:generate(prompt, { max_new_tokens = NEW, do_sample = false })
  return { model = ref, logits = out.logits, loss = out.loss:item(), tokens = tokens }
end

local function pp2(schedule, virtual_stages)
  return accel.Accelerator{ parallelism_config = accel.ParallelismConfig{
    pp_size = 2, pp_microbatches = 4, pp_schedule = schedule, pp_virtual_stages = virtual_stages } }
end

local function shape(t) return table.concat(t:size(), "x") end

local function same_tokens(tokens, expected, what)
  check.equal(shape(tokens), shape(expected), what .. ": the shape")
  check.near(tokens, expected, 0, what)
end

local function through(ref, schedule, virtual_stages, config)
  local what = string.format("%s (v %d)%s", schedule, virtual_stages or 1,
                             config and config.tie_word_embeddings and ", tied" or "")
  local acc = pp2(schedule, virtual_stages)
  local model = acc:prepare(pipeline_check.tiny(config))
  model:eval()
  local out = model{ input_ids = x }
  check.equal(shape(out.logits), "16x8x32", what .. ": out.logits is [B, T, vocab] on rank " .. acc.process_index)
  check.near(out.logits, ref.logits, 1e-5, what .. ": eval logits, no labels")
  check.raises(function() return out.loss end, what .. ": loss without labels", "out.loss needs labels")
  out = model{ input_ids = x, labels = x }
  check.near(out.logits, ref.logits, 1e-5, what .. ": eval logits with labels")
  check.near(out.loss, ref.loss, 1e-5, what .. ": eval loss beside the logits")
  check.raises(function() return out.hidden_states end, what .. ": another field", "holds loss and logits only")
  model:train()
  local under = accel.no_grad(function() return model{ input_ids = x }.logits end)
  check.near(under, ref.logits, 1e-5, what .. ": logits under no_grad in training mode")
  for _, p in ipairs(model:parameters()) do check.truthy(p.grad == nil, what .. ": no gradient") end

  local tokens = model:generate(prompt, { max_new_tokens = NEW, do_sample = false })
  same_tokens(tokens, ref.tokens, what .. ": greedy generate (3 rows, filled to 4 micro-batches)")
  check.truthy(model.training, what .. ": generate gives the training mode back")
  local row = prompt:narrow(1, 2, 1)
  same_tokens(model:generate(row, { max_new_tokens = NEW }), ref.model:generate(row, { max_new_tokens = NEW }),
              what .. ": one row")
  local four = x:narrow(1, 5, 4):narrow(2, 1, 4)
  same_tokens(model:generate(four, { max_new_tokens = NEW, attention_mask = accel.ones({ 4, 4 }) }),
              ref.model:generate(four, { max_new_tokens = NEW }), what .. ": 4 rows, a mask of ones")
  -- eos: the reference's third new token of row 1 stops that row (padded
  -- after), min_new_tokens 2 keeps it off the first two, a penalty on.
  local eos = ref.tokens:narrow(1, 1, 1):narrow(2, prompt:size(2) + 3, 1):item()
  local o = { max_new_tokens = NEW, eos_token_id = eos, pad_token_id = 0, min_new_tokens = 2, repetition_penalty = 1.3 }
  same_tokens(model:generate(prompt, o), ref.model:generate(prompt, o), what .. ": eos, min_new_tokens, penalty")
  -- Sampling: each rank's generator differs; the tokens are the last stage's rank's on both.
  accel.manual_seed(500 + acc.process_index)
  local sampled = model:generate(prompt, { max_new_tokens = NEW, do_sample = true, top_k = 5, temperature = 0.8 })
  local from0 = sampled:clone()
  acc.mesh.pp:broadcast(from0, 0)
  same_tokens(sampled, from0, what .. ": sampled tokens agree over the pp ranks")

  check.raises(function() model:generate(prompt, { attention_mask = accel.tensor({ { 0, 1, 1, 1, 1 }, { 1, 1, 1, 1, 1 },
                                                                                  { 1, 1, 1, 1, 1 } }) }) end,
               what .. ": padding", "attention_mask has zeros (padding)")
  model:train()
  check.raises(function() model{ input_ids = x } end, what .. ": no labels in training",
               "needs input_ids and labels", "input_ids alone gives out.logits")
  local training = model{ input_ids = x, labels = x }
  check.raises(function() return training.logits end, what .. ": logits in training", "output holds only loss",
               "out.logits is read in evaluation")
  acc:backward(training.loss)
  model:zero_grad()
  return model
end

local ref = reference()
through(ref, "1F1B")
through(ref, "Interleaved1F1B", 2)
local tied = { tie_word_embeddings = true }
through(reference(tied), "1F1B", nil, tied)

-- An nn.Sequential: in evaluation out.output is its last layer's output.
accel.set_seed(7)
local seq = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 3))
seq.loss_fn = function(output, target) return F.mse_loss(output, target) end
local input, target = accel.randn({ 8, 6 }), accel.randn({ 8, 3 })
local expected = accel.no_grad(function() return seq(input) end)
local seq_model = pp2("1F1B"):prepare(seq)
seq_model:eval()
local seq_out = seq_model{ input = input, labels = target }
check.near(seq_out.output, expected, 1e-6, "Sequential: out.output in evaluation")
check.near(seq_out.loss, F.mse_loss(expected, target):item(), 1e-6, "Sequential: out.loss beside it")
check.raises(function() seq_model:generate(input) end, "Sequential generate", "generating needs a causal LM")
check.done("pipeline generate")
