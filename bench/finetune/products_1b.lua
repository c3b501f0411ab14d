-- The single products behind bench/finetune/RESULTS-1b.md's speed reading,
-- at the 1B Llama's shapes (hidden 2048, intermediate 8192, vocabulary
-- 128,256), 256 tokens, on this process's LibTorch:
--   nice build/accel-run bench/finetune/products_1b.lua --threads 2
-- 1. an MLP projection (256 x 2048 by 2048 x 8192), float32 and bfloat16:
--    the GEMM rate (compare torch's with the same shapes);
-- 2. the same projection as a Linear4bit (nf4, double quantization, bf16
--    compute): its forward, and decoding its weight alone;
-- 3. the tied output layer under the chunked loss (F.linear_cross_entropy,
--    forward + backward, the weight frozen as under LoRA and QLoRA) at chunk
--    sizes 8 (the default at this shape: the power of two above
--    256 / ceil(128256 / 2048)), 64 and 256, float32 and bfloat16.
-- Medians are not taken: one run of each after a warm-up (the loss) or the
-- mean of 3 (the products). Needs ~2.5 GB (the float32 output weight).
local F = accel.nn.functional
local tokens, hidden, intermediate, vocab = 256, 2048, 8192, 128256

local function seconds(f, runs)
  f()
  local start = accel.time()
  for _ = 1, runs do f() end
  return (accel.time() - start) / runs
end

accel.set_seed(0)
accel.no_grad(function()
  local lin = accel.nn.Linear(hidden, intermediate, { bias = false })
  for _, dtype in ipairs({ "float32", "bfloat16" }) do
    local x, w = accel.randn(tokens, hidden):to(dtype), lin.weight:to(dtype)
    local s = seconds(function() return F.linear(x, w) end, 3)
    print(string.format("%s projection: %.3f s, %.1f GFLOP/s", dtype, s, 2 * tokens * hidden * intermediate / s / 1e9))
  end
  local q = accel.quantization.Linear4bit(lin, { quant_type = "nf4", double_quant = true, compute_dtype = "bfloat16" })
  local x = accel.randn(tokens, hidden):to("bfloat16")
  print(string.format("Linear4bit forward: %.3f s; decoding the weight alone: %.3f s",
                      seconds(function() return q(x) end, 3),
                      seconds(function() return q:dequantized_weight("bfloat16") end, 3)))
end)

local weight = accel.randn(vocab, hidden) * 0.02
local targets = accel.randint(0, vocab, { tokens })
for _, dtype in ipairs({ "float32", "bfloat16" }) do
  local w = weight:to(dtype)
  for _, chunk in ipairs({ 8, 64, 256 }) do
    local s = seconds(function()
      local h = accel.randn(tokens, hidden):to(dtype):requires_grad_()
      F.linear_cross_entropy(h, w, targets, { index_base = 0, chunk_size = chunk }):backward()
    end, 1)
    print(string.format("%s chunked loss, chunk %d: forward + backward %.2f s", dtype, chunk, s))
  end
  collectgarbage("collect")
end
