-- nproc: 4
-- PP 4 through the Accelerator: a small Llama of 6 decoder layers (9
-- pipeline layers) cut into 4 stages, or 8 with Interleaved1F1B's 2 stages
-- per rank; GPipe, 1F1B and Interleaved1F1B with 4 micro-batches, 10 AdamW
-- steps with clipping (which acts) give one process's losses (on every
-- rank), gradient norms (over the four stages) and weights within 1e-5
-- (float32), Interleaved1F1B also accumulating over 2 micro-steps; tied
-- embeddings (ranks 0 and 3) alike. At
-- lr 3e-3: at 1e-2 this deeper model's gradient norm strays from one
-- process's by 2.5e-5 (relative) at step 6, at PP 2 just the same (the
-- micro-batches' sum in another order than the whole batch's, which
-- AdamW's steps on near-zero gradients amplify), not the pipeline's doing.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local pipeline_check = dofile(arg[0]:match("(.*/)") .. "helpers/pipeline_check.lua")

local ref = pipeline_check.reference(check, { config = { num_hidden_layers = 6 }, lr = 3e-3 })
local acc, model
for _, run in ipairs({ { schedule = "GPipe", pp = 4 }, { schedule = "1F1B", pp = 4 },
                       { schedule = "Interleaved1F1B", pp = 4, virtual_stages = 2, accumulation = 2 },
                       { schedule = "Interleaved1F1B", pp = 4, virtual_stages = 2 } }) do
  acc, model = pipeline_check.train(check, ref, run)
end
-- Tied embeddings on ranks 0 and 3, ranks 1 and 2 adding zeros to their sum.
pipeline_check.train(check, pipeline_check.reference(check, { config = { num_hidden_layers = 6,
                                                                         tie_word_embeddings = true }, lr = 3e-3 }),
                     { schedule = "1F1B", pp = 4 })
-- 9 layers over 8 stages (the first holds two), stage s on rank (s - 1) % 4.
local expected = { "embed_tokens,layers.0,layers.4", "layers.1,layers.5", "layers.2,norm", "layers.3,lm_head" }
check.equal(table.concat(model:layer_names(), ","), expected[acc.process_index + 1],
            "Interleaved1F1B at pp 4, v 2: rank " .. acc.process_index .. "'s stages")
check.done("pipeline pp 4")
