-- A GPT-2 small of 124M parameters with random weights (seed 1), saved
-- with save_pretrained to arg[1]: bench/serve/first_step.sh's checkpoint.
accel.set_seed(1)
local model = accel.models.from_config({ model_type = "gpt2", vocab_size = 50257, n_positions = 1024, n_embd = 768,
                                         n_layer = 12, n_head = 12 })
local n = 0
for _, p in ipairs(model:parameters()) do n = n + p:numel() end
print(string.format("parameters %d", n))
model:save_pretrained(arg[1])
