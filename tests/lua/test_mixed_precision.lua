-- Mixed precision: bf16 autocast trains the quickstart problem to the same
-- accuracy as fp32 (within 1 point); the fp16 loss scaler skips exactly the
-- steps whose gradients overflow and adjusts its scale as specified.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local nn, optim, data, F = accel.nn, accel.optim, accel.data, accel.nn.functional

local function accuracy_with(precision)
  accel.set_seed(0)
  local acc = accel.Accelerator{ mixed_precision = precision }
  local centers = accel.randn(4, 16) * 3
  local labels = accel.randint(1, 5, { 3000 })
  local x = centers:index_select(1, labels) + accel.randn(3000, 16) * 4
  local train = data.DataLoader(data.TensorDataset(x:narrow(1, 1, 2000), labels:narrow(1, 1, 2000)),
                                { batch_size = 32, shuffle = true })
  local model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))
  local opt = optim.AdamW(model:parameters(), { lr = 1e-2 })
  model, opt, train = acc:prepare(model, opt, train)
  local inner_dtype
  local first = model[1]
  for _ = 1, 2 do
    for xb, yb in train:iter() do
      local logits = model(xb)
      inner_dtype = inner_dtype or acc:autocast(function() return first(xb) end).dtype
      acc:backward(F.cross_entropy(logits, yb))
      opt:step()
      opt:zero_grad()
    end
  end
  local hits = accel.no_grad(function()
    return model(x:narrow(1, 2001, 1000)):argmax(-1):eq(labels:narrow(1, 2001, 1000)):sum():item()
  end)
  return hits / 1000, model(x:narrow(1, 1, 2)).dtype
end

local fp32 = accuracy_with("no")
local bf16, output_dtype = accuracy_with("bf16")
print(string.format("accuracy fp32 %.3f, bf16 %.3f", fp32, bf16))
check.truthy(fp32 > 0.9, "fp32 learns")
check.truthy(math.abs(fp32 - bf16) <= 0.01, "bf16 within 1 point of fp32")
check.equal(output_dtype, accel.float32, "prepared bf16 models return float32")
local probe = accel.Accelerator{ mixed_precision = "bf16" }
check.equal(probe:autocast(function() return accel.matmul(accel.ones(2, 2), accel.ones(2, 2)) end).dtype,
            accel.float32, "autocast results come back as float32")
check.equal(require("accel.core").amp.autocast(function()
  return accel.matmul(accel.ones(2, 2), accel.ones(2, 2))
end).dtype, accel.bfloat16, "matmul runs in bf16 under autocast")

-- fp16 scaler: start at 1024, grow x2 after 3 good steps, halve on overflow.
local acc = accel.Accelerator{ mixed_precision = "fp16",
                               loss_scaler = { init_scale = 1024, growth_interval = 3 } }
accel.set_seed(1)
local model = nn.Linear(4, 1)
local opt = optim.SGD(model:parameters(), { lr = 0.1 })
local sched = optim.lr_scheduler.lambda(opt, function(step) return 1 / (step + 1) end)
model, opt, sched = acc:prepare(model, opt, sched)
local x = accel.randn(8, 4)
local plan = { false, false, true, false, false, false, true, false }  -- true: overflow
local expected_scale = { 1024, 1024, 512, 512, 512, 1024, 512, 512 }
local skipped = 0
for step, overflow in ipairs(plan) do
  local before = model.weight:clone()
  local loss = model(x):pow(2):mean()
  if overflow then loss = loss * math.huge end
  acc:backward(loss)
  opt:step()
  sched:step()
  opt:zero_grad()
  local moved = (model.weight - before):abs():sum():item() > 0
  check.equal(moved, not overflow, "step " .. step .. " applied unless it overflowed")
  check.equal(opt.step_was_skipped, overflow, "step_was_skipped at step " .. step)
  check.equal(acc:loss_scale(), expected_scale[step], "loss scale after step " .. step)
  if overflow then skipped = skipped + 1 end
end
check.equal(opt.updates, #plan - skipped, "updates exclude skipped steps")
check.near(sched:get_last_lr()[1], 0.1 / (opt.updates + 1), 1e-9,
           "the schedule advanced once per update, not on skipped steps")

-- fp8 computes on a GPU's float8 units (tests/gpu/float8.lua): refused
-- elsewhere, saying why; and an unknown precision names the known ones.
check.raises(function() accel.Accelerator{ mixed_precision = "fp8", cpu = true } end, "fp8 on the CPU",
             "mixed_precision = 'fp8'", "this Accelerator computes on the CPU")
check.raises(function() accel.Accelerator{ mixed_precision = "fp4" } end, "an unknown precision",
             "'no', 'bf16', 'fp16' or 'fp8', got 'fp4'")

check.done("test_mixed_precision")
