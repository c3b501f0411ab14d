-- A tiny random Llama checkpoint folder for tests/models/test_finetune_recipe.sh,
-- made by accel itself (no Python): config.json and model.safetensors from
-- from_config, and the committed byte-level BPE tokenizer fixture beside them.
--   accel-run finetune_make_model.lua -- OUT_DIR
local out_dir = assert(arg[1], "usage: accel-run finetune_make_model.lua -- OUT_DIR")
local fixtures = arg[0]:match("(.*/)") .. "../tokenizers/fixtures/byte_level"

local tok = accel.tokenizers.from_pretrained(fixtures)
accel.set_seed(3)
local model = accel.models.from_config({
  model_type = "llama", vocab_size = tok:get_vocab_size(), hidden_size = 32, intermediate_size = 64,
  num_hidden_layers = 2, num_attention_heads = 4, num_key_value_heads = 2, max_position_embeddings = 128,
  bos_token_id = tok.bos_token_id, eos_token_id = tok.eos_token_id, tie_word_embeddings = false,
  -- Weights far from zero, as a trained model's are: adapters on a model whose
  -- output is near zero (the default 0.02) barely move its logits.
  initializer_range = 0.5,
})
model:save_pretrained(out_dir)
tok:save_pretrained(out_dir)
print("made " .. out_dir)
