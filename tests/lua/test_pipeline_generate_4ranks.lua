-- nproc: 4
-- Evaluation and generation through a pipeline beside other dims, against
-- one process's tiny Llama: PP 2 x DP 2 (1F1B), each dp rank its own rows:
-- eval out.logits equal one process's rows within 1e-5 on all four ranks
-- and greedy generate of 8 new tokens its tokens exactly; PP 2 x TP 2
-- with llama's own plan (lm_head's logits gathered): the whole logits and
-- the greedy tokens alike; with a vocabulary-parallel head each rank's
-- logits are its tp rank's slice of the vocabulary (one tensor-parallel
-- process's), and generate is refused naming the head.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local pipeline_check = dofile(arg[0]:match("(.*/)") .. "helpers/pipeline_check.lua")

local NEW, V = 8, pipeline_check.TINY.vocab_size
local x = pipeline_check.batch(99)          -- 16 rows of 8 tokens
local ref = pipeline_check.tiny():eval()
local ref_logits = accel.no_grad(function() return ref{ input_ids = x }.logits end)

local function prepared(sizes, plan)
  local acc = accel.Accelerator{ parallelism_config = accel.ParallelismConfig{
    pp_size = 2, dp_replicate_size = sizes.dp or 1, tp_size = sizes.tp or 1, pp_microbatches = 4 } }
  local base = pipeline_check.tiny()
  if sizes.tp then base = accel.parallel.tensor_parallel(base, acc.mesh, plan) end
  local model = acc:prepare(base)
  model:eval()
  return acc, model
end

local function same_tokens(tokens, expected, what)
  check.equal(table.concat(tokens:size(), "x"), table.concat(expected:size(), "x"), what .. ": the shape")
  check.near(tokens, expected, 0, what)
end

-- PP 2 x DP 2: dp rank r evaluates rows 8r + 1 .. 8r + 8 and generates from 2 of them.
do
  local acc, model = prepared{ dp = 2 }
  local r, what = acc.mesh.dp.rank, "PP 2 x DP 2 on rank " .. acc.process_index
  local rows = x:narrow(1, 8 * r + 1, 8)
  check.near(model{ input_ids = rows }.logits, ref_logits:narrow(1, 8 * r + 1, 8), 1e-5, what .. ": eval logits")
  local prompt = rows:narrow(1, 1, 2):narrow(2, 1, 5)
  same_tokens(model:generate(prompt, { max_new_tokens = NEW }), ref:generate(prompt, { max_new_tokens = NEW }),
              what .. ": greedy generate")
end

-- PP 2 x TP 2, the head gathered: one process's logits and tokens.
local prompt = x:narrow(1, 1, 3):narrow(2, 1, 5)
local ref_tokens = ref:generate(prompt, { max_new_tokens = NEW })
do
  local acc, model = prepared{ tp = 2 }
  local what = "PP 2 x TP 2 on rank " .. acc.process_index
  check.near(model{ input_ids = x, labels = x }.logits, ref_logits, 1e-5, what .. ": eval logits")
  same_tokens(model:generate(prompt, { max_new_tokens = NEW }), ref_tokens, what .. ": greedy generate")
end

-- A vocabulary-parallel head: each tp rank's slice of the vocabulary.
do
  local acc, model = prepared({ tp = 2 }, pipeline_check.vocab_parallel_plan())
  local t, what = acc.mesh.tp.rank, "PP 2 x TP 2, lm_head colwise, on rank " .. acc.process_index
  local out = model{ input_ids = x, labels = x }
  check.near(out.logits, ref_logits:narrow(3, t * V / 2 + 1, V / 2), 1e-5, what .. ": eval logits, the tp slice")
  check.near(out.loss, accel.no_grad(function() return ref{ input_ids = x, labels = x }.loss end), 1e-5,
             what .. ": eval loss")
  check.raises(function() model:generate(prompt) end, what .. ": generate", "lm_head is vocabulary-parallel")
end
check.done("pipeline generate 4 ranks")
