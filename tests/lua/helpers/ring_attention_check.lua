-- Ring attention alone (ProcessGroup:ring_attention over a mesh's cp group)
-- against F.scaled_dot_product_attention of the whole sequence in this
-- process: the output and the gradients of q, k and v, gathered back from
-- every cp rank's part (accel.parallel.context_parallel_gather), within 1e-5,
-- causal (in the load-balanced layout) and not, with as many key/value heads
-- as query heads and with fewer (grouped-query attention).
--   ring_check.run(check, mesh [, "bfloat16"])
-- In bfloat16, q, k and v of values bfloat16 holds: computed in float32, the
-- output and gradients are float32's rounded once to bfloat16, within 2^-8
-- relative, so 4e-3 (attention computed in bfloat16 misses by 1.4e-2).
local F = accel.nn.functional

local ring_check = {}

local function compare(check, mesh, causal, kv_heads, dtype)
  local B, H, E = 2, 4, 8
  local T = 4 * mesh.cp.size  -- two chunks of 2 positions per rank
  accel.set_seed(7)
  local q, k, v = accel.randn({ B, H, T, E }), accel.randn({ B, kv_heads, T, E }), accel.randn({ B, kv_heads, T, E })
  local weights = accel.randn({ B, H, T, E })  -- makes every output element count in the loss
  if dtype then q, k, v, weights = q:to(dtype):float(), k:to(dtype):float(), v:to(dtype):float(), weights:to(dtype):float() end
  local whole = {}
  for i, t in ipairs({ q, k, v }) do whole[i] = t:clone():requires_grad_() end
  local expected = F.scaled_dot_product_attention(whole[1], whole[2], whole[3],
                                                  { is_causal = causal, enable_gqa = kv_heads ~= H })
  local loss = (expected * weights):sum()
  loss:backward()

  local parts = {}
  for i, t in ipairs({ q, k, v }) do
    parts[i] = accel.parallel.context_parallel_part(dtype and t:to(dtype) or t, mesh, 3):requires_grad_()
  end
  local out = mesh.cp.group:ring_attention(parts[1], parts[2], parts[3], { causal = causal })
  loss = (out * accel.parallel.context_parallel_part(weights, mesh, 3)):sum()
  loss:backward()

  local what = string.format("ring attention over cp %d (%s, %d kv heads of %d%s)", mesh.cp.size,
                             causal and "causal" or "not causal", kv_heads, H, dtype and ", " .. dtype or "")
  local gather = function(t) return accel.parallel.context_parallel_gather(t:detach(), mesh, 3):float() end
  local tol = dtype and 4e-3 or 1e-5
  check.equal(out.dtype, dtype or "float32", what .. ": the output's dtype")
  check.near(gather(out), expected:detach(), tol, what .. ": output")
  for i, name in ipairs({ "q", "k", "v" }) do
    check.equal(parts[i].grad.dtype, dtype or "float32", what .. ": the dtype of " .. name .. "'s gradient")
    check.near(gather(parts[i].grad), whole[i].grad, tol, what .. ": the gradient of " .. name)
  end
end

function ring_check.run(check, mesh, dtype)
  for _, causal in ipairs({ true, false }) do
    for _, kv_heads in ipairs({ 4, 2 }) do compare(check, mesh, causal, kv_heads, dtype) end
  end
end

return ring_check
