-- mixed_precision = "fp8" on a GPU with float8 units: the Accelerator puts
-- the float8 forward on each Linear that fits (sizes multiples of 16); its
-- outputs and gradients stay within float8's rounding of float32's, and a
-- small model trains as well as under bf16. Run by test_gpu_float8.sh;
-- prints "ok: ..." per check, or "SKIPPED: ..." where the GPU has no float8.
local nn, optim, F = accel.nn, accel.optim, accel.nn.functional

local function check(what, ok, detail)
  if not ok then error("FAILED: " .. what .. (detail and (": " .. tostring(detail)) or ""), 0) end
  print("ok: " .. what)
end

local why = accel.cuda.float8_unavailable()
if why then
  local ok, err = pcall(function() accel.Accelerator{ mixed_precision = "fp8" } end)
  check("fp8 is refused here, saying why", not ok and tostring(err):find(why, 1, true), err)
  print("SKIPPED: " .. why)
  return
end

local function relative(a, b)
  return (a:float() - b:float()):norm():item() / b:float():norm():item()
end

-- One layer, against float32 on the same weights and input.
accel.set_seed(1)
local x0 = accel.randn(64, 256, { device = "cuda:0" })
local w0 = accel.randn(512, 256, { device = "cuda:0" }) * 0.05
local b0 = accel.randn(512, { device = "cuda:0" })
local g = accel.randn(64, 512, { device = "cuda:0" })
local function run(linear)
  local x, w, b = x0:clone():requires_grad_(), w0:clone():requires_grad_(), b0:clone():requires_grad_()
  local y = linear(x, w, b)
  y:backward(g)
  return y, x.grad, w.grad, b.grad
end
local y8, dx8, dw8, db8 = run(F.float8_linear)
local y32, dx32, dw32, db32 = run(F.linear)
check("float8 output is bfloat16", y8.dtype == "bfloat16", y8.dtype)
check("output within 5% of float32's (relative norm)", relative(y8, y32) < 0.05, relative(y8, y32))
check("input gradient within 10%", relative(dx8, dx32) < 0.1, relative(dx8, dx32))
check("weight gradient within 10%", relative(dw8, dw32) < 0.1, relative(dw8, dw32))
check("bias gradient within 1%", relative(db8, db32) < 0.01, relative(db8, db32))
check("gradients keep their tensors' dtypes", dw8.dtype == "float32" and dx8.dtype == "float32", dw8.dtype)
local x, w, b = x0, w0, b0
local ok, err = pcall(function() F.float8_linear(x, w:narrow(1, 1, 250), b) end)
check("sizes float8 cannot take are refused, named", not ok and tostring(err):find("multiples of 16", 1, true), err)

-- Training: the same model and data under bf16 and fp8.
local function train(precision)
  accel.set_seed(2)
  local acc = accel.Accelerator{ mixed_precision = precision }
  local model = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 256), nn.GELU(), nn.Linear(256, 16))
  local opt = optim.AdamW(model:parameters(), { lr = 2e-3 })
  model, opt = acc:prepare(model, opt)
  local teacher = accel.randn(64, 16, { device = acc.device })
  local first, last
  for i = 1, 300 do
    local xb = accel.randn(128, 64, { device = acc.device })
    local loss = F.mse_loss(model(xb), xb:matmul(teacher):tanh())
    acc:backward(loss)
    opt:step(); opt:zero_grad()
    if i == 1 then first = loss:item() end
    last = loss:item()
  end
  local converted = 0
  for _, m in ipairs(model:modules()) do
    if getmetatable(m) == nn.Linear and rawget(m, "forward") then converted = converted + 1 end
  end
  return first, last, converted
end
local bf_first, bf_last = train("bf16")
local f8_first, f8_last, converted = train("fp8")
print(string.format("bf16 loss %.4f -> %.4f; fp8 loss %.4f -> %.4f", bf_first, bf_last, f8_first, f8_last))
check("fp8 put float8 on the three Linears", converted == 3, converted)
check("fp8 learns: the loss falls threefold", f8_last < f8_first / 3, f8_first .. " -> " .. f8_last)
check("as well as bf16 (within 1.5x of its final loss)", f8_last < 1.5 * bf_last + 1e-4, f8_last .. " vs " .. bf_last)
