-- The GPU's tensor surface on one rank: placement, copies, accel.cuda, the
-- device errors, autocast dtypes and the loss scaler's CUDA kernel.
-- Run by test_gpu_tensors.sh; prints "ok: ..." per check, errors on a failure.
local amp = require("accel.core").amp

local function check(what, ok, detail)
  if not ok then error("FAILED: " .. what .. (detail and (": " .. tostring(detail)) or ""), 0) end
  print("ok: " .. what)
end

local function raises(fn, ...)
  local ok, message = pcall(fn)
  if ok then return false, "no error" end
  for _, part in ipairs({ ... }) do
    if not tostring(message):find(part, 1, true) then return false, message end
  end
  return true
end

check("accel.cuda.is_available", accel.cuda.is_available() and accel.cuda.is_built())
check("device_count >= 1", accel.cuda.device_count() >= 1)
local acc = accel.Accelerator{}
check("acc.device is the first GPU", acc.device == "cuda:0", acc.device)
check("Accelerator{cpu = true} stays on the CPU", accel.Accelerator{ cpu = true }.device == "cpu")

local x = accel.randn(4, 3)
local g = x:cuda()
check("t:cuda() lands on cuda:0", g.device == "cuda:0" and g.is_cuda, g.device)
check("t:to('cuda:0') and back keeps the values", g:to("cpu"):equal(x) and x:to("cuda:0"):cpu():equal(x))
check("t:cpu() of a GPU tensor", g:cpu().device == "cpu")
local pinned = x:pin_memory()
check("pin_memory gives pinned host memory", pinned:is_pinned() and not x:is_pinned())
check("a non-blocking copy from pinned memory", pinned:to("cuda:0", true):cpu():equal(x))
check("t:cuda(7) names the missing GPU",
      raises(function() return x:cuda(7) end, "no GPU 7", "sees " .. accel.cuda.device_count()))
check("an op across devices names both devices",
      raises(function() return g + x end, "cuda:0", "cpu"))

-- Earlier checks' GPU tensors are freed when Lua collects them: collect
-- first, so that none is freed while the 4 MiB one is counted.
collectgarbage()
collectgarbage()
local before = accel.cuda.memory_allocated()
local big = accel.zeros(1024, 1024):cuda()
check("memory_allocated counts a 4 MiB tensor", accel.cuda.memory_allocated() - before >= 4 * 1024 * 1024)
check("max_memory_allocated >= memory_allocated", accel.cuda.max_memory_allocated() >= accel.cuda.memory_allocated())
big = nil
collectgarbage()
accel.cuda.synchronize()
accel.cuda.empty_cache()
check("get_device_name names the GPU", #accel.cuda.get_device_name(0) > 0, accel.cuda.get_device_name(0))

-- Generators: the GPU's state round-trips, and seeding reaches it.
accel.set_seed(3)
local state = accel.cuda.get_rng_state()
local a = accel.randn(5, { device = "cuda:0" })  -- drawn on the GPU
accel.cuda.set_rng_state(state)
local b = accel.randn(5, { device = "cuda:0" })
check("the CUDA generator state restores the same draws", a:equal(b))

-- Models: prepare moves parameters in place; the optimizer made before sees them.
local nn, F = accel.nn, accel.nn.functional
accel.set_seed(0)
local model = nn.Linear(3, 2)
local opt = accel.optim.SGD(model:parameters(), { lr = 0.1 })
local loader = accel.data.DataLoader(accel.data.TensorDataset(accel.randn(8, 3), accel.randn(8, 2)), { batch_size = 4 })
model, opt, loader = acc:prepare(model, opt, loader)
check("prepare places the model on the GPU", model.weight.device == "cuda:0")
local w0 = model.weight:detach():cpu()
for xb, yb in loader:iter() do
  check("prepared loaders yield GPU batches", xb.device == "cuda:0" and yb.device == "cuda:0", xb.device)
  acc:backward(F.mse_loss(model(xb), yb))
  opt:step()
  opt:zero_grad()
end
check("the optimizer made before prepare updated the GPU parameters",
      not model.weight:detach():cpu():equal(w0))

-- Autocast on the GPU gives the dtype asked for; losses come back float32.
for _, case in ipairs({ { "bf16", "bfloat16" }, { "fp16", "float16" } }) do
  local mp = accel.Accelerator{ mixed_precision = case[1] }
  local m = mp:prepare(nn.Linear(3, 2))
  local raw = amp.autocast(function() return m.weight:matmul(m.weight:t()) end, case[2], "cuda")
  check(case[1] .. ": accel.amp.autocast on cuda gives " .. case[2], raw.dtype == case[2], raw.dtype)
  check(case[1] .. ": a prepared model's output is float32", m(accel.randn(2, 3):cuda()).dtype == "float32")
end

-- The fp16 scaler unscales GPU gradients with the fused kernel and finds inf.
local scaler = amp.LossScaler{ init_scale = 4 }
local p = accel.ones(3):cuda():requires_grad_(true)
p.grad = accel.tensor({ 4, 8, 12 }):cuda()
check("unscale divides GPU gradients by the scale", not scaler:unscale({ p }) and p.grad:cpu():equal(accel.tensor({ 1, 2, 3 })))
p.grad = accel.tensor({ 1, math.huge, 0 }):cuda()
check("unscale finds an inf in a GPU gradient", scaler:unscale({ p }))
