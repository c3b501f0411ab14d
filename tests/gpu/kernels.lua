-- What the GPU runs for the multi-tensor and fused paths, seen in a trace
-- of acc:profile with CUDA activity: optimizers on CUDA take the foreach
-- kernels by default and agree with the for-loop; fused AdamW agrees with
-- foreach; clipping's norms agree with the CPU's; attention without
-- weights runs a fused kernel and agrees with the explicit one. Run by
-- test_gpu_kernels.sh; prints "ok: ..." per check.
local nn, optim, F = accel.nn, accel.optim, accel.nn.functional

local function check(what, ok, detail)
  if not ok then error("FAILED: " .. what .. (detail and (": " .. tostring(detail)) or ""), 0) end
  print("ok: " .. what)
end

local read = dofile(arg[0]:match("(.*/)") .. "../lua/helpers/read_file.lua")

local acc = accel.Accelerator{}
local folder = os.tmpname() .. "_traces"

local function train(options, steps)
  accel.set_seed(4)
  local model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8)):to(acc.device)
  local opt = optim.AdamW(model:parameters(), options)
  local x, y = accel.randn(16, 32, { device = acc.device }), accel.randn(16, 8, { device = acc.device })
  for _ = 1, steps do
    F.mse_loss(model(x), y):backward()
    opt:step()
    opt:zero_grad()
  end
  local out = {}
  for i, p in ipairs(model:parameters()) do out[i] = p:detach():cpu() end
  return out
end

local function max_relative(a, b)
  local worst = 0
  for i = 1, #a do worst = math.max(worst, (a[i] - b[i]):abs():max():item() / (b[i]:abs():max():item() + 1e-12)) end
  return worst
end

-- The default on CUDA is the foreach path: its kernels are in the trace.
local paths = acc:profile(function() train({ lr = 1e-2 }, 2) end, { output = folder })
local trace = read(paths[1])
check("a trace with CUDA activity has kernels", trace:find('"cat": "kernel"', 1, true) ~= nil)
check("the default AdamW on CUDA runs multi-tensor kernels", trace:find("multi_tensor_apply_kernel", 1, true) ~= nil)
local loop = train({ lr = 1e-2, foreach = false }, 5)
local foreach = train({ lr = 1e-2, foreach = true }, 5)
local fused = train({ lr = 1e-2, fused = true }, 5)
check("foreach agrees with the for-loop on CUDA", max_relative(foreach, loop) < 1e-5, max_relative(foreach, loop))
check("fused agrees with foreach", max_relative(fused, foreach) < 1e-4, max_relative(fused, foreach))
paths = acc:profile(function() train({ lr = 1e-2, fused = true }, 1) end, { output = folder })
check("fused AdamW runs the fused kernel", read(paths[1]):find("FusedAdam", 1, true) ~= nil)

-- Clipping over many gradients on CUDA: the norm equals the CPU's.
accel.set_seed(5)
local params, cpu_params = {}, {}
for i = 1, 12 do
  local p = accel.randn(7 * i, { device = acc.device }):requires_grad_()
  p.grad = accel.randn(7 * i, { device = acc.device })
  params[i] = p
  local q = p:detach():cpu():requires_grad_()
  q.grad = p.grad:cpu()
  cpu_params[i] = q
end
local norm = accel.clip_grad_norm(params, 1.0)
local cpu_norm = accel.clip_grad_norm(cpu_params, 1.0)
check("clip_grad_norm's norm on CUDA equals the CPU's", math.abs(norm:item() - cpu_norm:item()) < 1e-4 * cpu_norm:item(),
      norm:item() .. " vs " .. cpu_norm:item())
check("and the clipped gradients too", max_relative({ params[12].grad:cpu() }, { cpu_params[12].grad }) < 1e-5)

-- Attention: without weights, a fused kernel; its output agrees with the explicit path's.
accel.set_seed(6)
local mha = nn.MultiheadAttention(64, 4):to(acc.device)
local q = accel.randn(2, 128, 64, { device = acc.device })
local fused_out
paths = acc:profile(function() fused_out = mha(q, q, q, { is_causal = true, need_weights = false }) end,
                    { output = folder })
local attention_trace = read(paths[1])
check("causal attention without weights runs a fused kernel",
      attention_trace:find("flash", 1, true) or attention_trace:find("fmha", 1, true)
      or attention_trace:find("efficient_attention", 1, true) or attention_trace:find("cudnn", 1, true))
local explicit_out = mha(q, q, q, { is_causal = true, need_weights = true })
check("and agrees with the explicit path", max_relative({ fused_out:cpu() }, { explicit_out:cpu() }) < 1e-4,
      max_relative({ fused_out:cpu() }, { explicit_out:cpu() }))
os.execute("rm -rf '" .. folder .. "'")
