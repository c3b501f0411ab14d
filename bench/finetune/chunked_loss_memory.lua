-- Peak memory of a language model's loss, forward and backward, with and
-- without the chunked loss (F.linear_cross_entropy, docs/api/finetuning.md):
-- hidden states of 4 x 1024 tokens, a 128,256-token vocabulary (Llama 3's),
-- float32. The output layer is frozen (LoRA and QLoRA keep lm_head frozen)
-- unless `trained` is given, when both paths also hold its weight gradient.
--   nice build/accel-run bench/finetune/chunked_loss_memory.lua --threads 2 [-- hidden [trained]]
-- The unchunked path needs ~4-6 GB at this shape: run it alone.
-- Peaks are the CPU allocator's (accel.cpu_memory_stats, blocks over 1 KiB)
-- above what was allocated before (the hidden states, the weight, the targets).
local F = accel.nn.functional

local hidden_size = tonumber(arg[1]) or 256
local trained = arg[2] == "trained"
local tokens, vocab = 4 * 1024, 128256
local MiB = 2 ^ 20

accel.set_seed(0)
local weight = (accel.randn(vocab, hidden_size) * 0.02):requires_grad_(trained)
local targets = accel.randint(0, vocab, { tokens })
local hidden = accel.randn(tokens, hidden_size)

local function measure(name, loss_of)
  local h = hidden:clone():requires_grad_()
  collectgarbage("collect")
  local before = accel.cpu_memory_stats().allocated_bytes
  accel.reset_peak_cpu_memory_stats()
  local start = os.clock()
  local loss = loss_of(h)
  loss:backward()
  local seconds = os.clock() - start
  local peak = accel.cpu_memory_stats().peak_allocated_bytes - before
  print(string.format("%-10s loss %.6f  peak above inputs %8.1f MiB  (cpu %.2f s)", name, loss:item(), peak / MiB,
                      seconds))
  weight.grad = nil
  return peak, loss:item(), h.grad
end

print(string.format("%d tokens x %d vocabulary, hidden %d, lm_head %s", tokens, vocab, hidden_size,
                    trained and "trained" or "frozen"))
local chunked, loss_c, grad_c = measure("chunked", function(h)
  return F.linear_cross_entropy(h, weight, targets, { index_base = 0 })
end)
collectgarbage("collect")
local full, loss_f, grad_f = measure("unchunked", function(h)
  return F.cross_entropy(F.linear(h, weight):float(), targets, { index_base = 0 })
end)
print(string.format("chunked / unchunked peak: 1/%.1f; losses differ by %.1e, hidden gradients by %.1e", full / chunked,
                    math.abs(loss_c - loss_f), (grad_c - grad_f):abs():max():item()))
