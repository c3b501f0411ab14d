-- Accelerator{cuda_graphs = true} on one GPU: a char-level transformer step
-- (forward with dropout, backward, clipping, fused AdamW, a warm-up
-- schedule) captured after warm-up and replayed equals the same steps run
-- eagerly with the fused optimizer, loss for loss and weight for weight,
-- bit for bit; under bf16 too. A call with other shapes runs eagerly and
-- says so; a step that reads a value on the host cannot be captured, says
-- why and runs eagerly from then on, with eager's results.
-- Run by test_gpu_cuda_graphs.sh; prints "ok: ..." per check.
local nn, optim, F = accel.nn, accel.optim, accel.nn.functional

local function check(what, ok, detail)
  if not ok then error("FAILED: " .. what .. (detail and (": " .. tostring(detail)) or ""), 0) end
  print("ok: " .. what)
end

local VOCAB, DIM, SEQ, BATCH, STEPS = 96, 64, 32, 8, 12

-- The batches, made once on the CPU from their own seed.
accel.set_seed(11)
local batches = {}
for i = 1, STEPS do
  local ids = accel.randint(1, VOCAB + 1, { BATCH, SEQ + 1 })
  batches[i] = { ids:narrow(2, 1, SEQ):cuda(), ids:narrow(2, 2, SEQ):cuda() }
end

-- Trains STEPS steps; returns the losses (numbers), the final weights
-- (CPU tensors), the step object and the prepared optimizer.
local function train(options, host_read)
  accel.set_seed(3)
  local acc = accel.Accelerator(options)
  local model = nn.Sequential(nn.Embedding(VOCAB, DIM),
                              nn.TransformerEncoderLayer(DIM, 4, { dim_feedforward = 128, is_causal = true }),
                              nn.Linear(DIM, VOCAB))
  local opt = optim.AdamW(model:parameters(), { lr = 3e-3, fused = true })
  local sched = optim.lr_scheduler.linear(opt, { warmup = 4, total = 40 })
  model, opt, sched = acc:prepare(model, opt, sched)
  local step = acc:train_step(function(x, y)
    local loss = F.cross_entropy(model(x):view(-1, VOCAB), y:view(-1))
    if host_read then loss:item() end
    acc:backward(loss)
    acc:clip_grad_norm(model:parameters(), 0.5)
    opt:step(); sched:step(); opt:zero_grad()
    return loss
  end)
  local losses = {}
  for i = 1, STEPS do losses[i] = step(batches[i][1], batches[i][2]):item() end
  local weights = {}
  for i, p in ipairs(model:parameters()) do weights[i] = p:detach():cpu() end
  return losses, weights, step, opt, sched
end

local function same(a, b)
  for i = 1, #a do
    if a[i] ~= b[i] then return false, string.format("value %d: %.9g against %.9g", i, a[i], b[i]) end
  end
  return #a == #b
end

local function same_weights(a, b)
  for i = 1, #a do
    if not a[i]:equal(b[i]) then return false, "parameter " .. i end
  end
  return true
end

for _, precision in ipairs({ "no", "bf16" }) do
  local eager, eager_weights, _, _, eager_sched = train({ mixed_precision = precision })
  local graphed, graphed_weights, step, opt, sched = train({ mixed_precision = precision, cuda_graphs = true })
  check(precision .. ": the step was captured", step.graph and step.graph:captured() and not step.eager_reason,
        step.eager_reason)
  check(precision .. ": fused AdamW under cuda_graphs", opt:implementation() == "fused", opt:implementation())
  local ok, detail = same(graphed, eager)
  check(precision .. ": replayed losses equal eager's bit for bit", ok, detail)
  ok, detail = same_weights(graphed_weights, eager_weights)
  check(precision .. ": and so do the final weights", ok, detail)
  check(precision .. ": every replay counted its update", opt.updates == STEPS, opt.updates)
  -- Linear: 4 steps up to 3e-3, then down to 0 at step 40; after 12 steps, 3e-3 * 28 / 36.
  check(precision .. ": and stepped the schedule as eagerly",
        sched:get_last_lr()[1] == eager_sched:get_last_lr()[1]
          and math.abs(sched:get_last_lr()[1] - 3e-3 * 28 / 36) < 1e-12,
        sched:get_last_lr()[1] .. " vs " .. eager_sched:get_last_lr()[1])
  print(string.format("%s losses: first %.6f last %.6f", precision, graphed[1], graphed[STEPS]))
end

-- Another batch size runs eagerly, that call only.
local _, _, step = train({ cuda_graphs = true })
local x, y = batches[1][1]:narrow(1, 1, 4), batches[1][2]:narrow(1, 1, 4)
local value = step(x, y):item()
check("a call of other shapes runs eagerly", value == value and step.graph:captured() and not step.eager_reason, value)
check("and says so", step.said["a step whose tensors are int64[4, 32] on cuda:0, int64[4, 32] on cuda:0 (captured: "
                          .. "int64[8, 32] on cuda:0, int64[8, 32] on cuda:0) runs eagerly"], next(step.said))

-- loss:item() inside the step: no capture; eager from then on, as eager.
local eager = train({})
local fallen, _, fallen_step = train({ cuda_graphs = true }, true)
check("a host read in the step is not captured", fallen_step.eager_reason ~= nil and not fallen_step.graph:captured())
local reason = next(fallen_step.said)
check("the line says why", reason and reason:find("could not be captured", 1, true), reason)
print("fallback line: cuda_graphs: " .. tostring(reason))
local ok, detail = same(fallen, eager)
check("and the run's losses are eager's", ok, detail)
