-- What the tests of experts through the Accelerator share
-- (test_expert_accelerator, test_expert_checkpoint): a tiny Mixtral (4
-- experts, top 2, float32) and its batches of ROWS rows of T tokens, the
-- same on every rank and in every run.
local expert_check = {}

expert_check.TINY = { model_type = "mixtral", vocab_size = 32, hidden_size = 16, intermediate_size = 32,
                      num_hidden_layers = 2, num_attention_heads = 4, num_key_value_heads = 2,
                      num_local_experts = 4, num_experts_per_tok = 2 }
expert_check.ROWS, expert_check.T = 8, 8

-- The model from `seed` (1 by default), in training mode.
function expert_check.tiny(seed)
  accel.set_seed(seed or 1)
  return accel.models.from_config(expert_check.TINY):train()
end

-- Step `step`'s batch of token ids.
function expert_check.batch(step)
  accel.set_seed(100 + step)
  return accel.randint(0, expert_check.TINY.vocab_size, { expert_check.ROWS, expert_check.T })
end

return expert_check
