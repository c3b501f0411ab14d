-- nproc: 2
-- The chunked loss vocabulary-parallel over tp 2: F.linear_cross_entropy
-- with process_group = tp.group (each rank's slice of the weight, the loss
-- reduced over the group per chunk) equals both the unchunked
-- vocabulary-parallel loss (accel.parallel.vocab_parallel_cross_entropy of
-- the slice's logits) and one process's F.cross_entropy of the full
-- logits: the loss and the gradients of the hidden states, the weight's and
-- the bias' slices within 1e-6 in float32, for chunks of 1, 5 and Liger's
-- size, with and without ignored targets, with num_items_in_batch and
-- reduction "sum"; under bfloat16 autocast within the measured tolerance.
-- Then a Llama split over tp 2 (lm_head "colwise", "colwise_gather" and,
-- with sequence parallelism, "colwise_sequence") called with labels in
-- training mode computes this loss and gets the one-process model's loss
-- and every parameter's gradient (its slice) within 1e-6, and under
-- bfloat16 autocast its loss within the measured tolerance.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local F = accel.nn.functional

local acc = accel.Accelerator{ parallelism_config = accel.ParallelismConfig{ tp_size = 2 } }
local tp = acc.mesh.tp
local function max_diff(a, b) return (a - b):abs():max():item() end
-- This rank's slice of a full tensor along dim 1 (its rows of the vocabulary).
local function slice(t) return t:narrow(1, tp.rank * t:size(1) / tp.size + 1, t:size(1) / tp.size) end

local N, H, V = 23, 16, 38
accel.set_seed(0)  -- the same tensors on both ranks
local hidden0 = accel.randn(N, H)
local weight0 = accel.randn(V, H) * 0.3
local bias0 = accel.randn(V) * 0.1
local targets = accel.randint(0, V, { N })
local ignored = targets:clone()
for _, i in ipairs({ 1, 4, 5, 11, 23 }) do ignored[i] = -100 end

-- Leaves: the whole layer (one process's) or this rank's slice of it.
local function leaves(split)
  local w, b = weight0:clone(), bias0:clone()
  if split then w, b = slice(w):clone(), slice(b):clone() end
  return { hidden = hidden0:clone():requires_grad_(), weight = w:requires_grad_(), bias = b:requires_grad_() }
end

local function from_sum(sum, count, o)
  if o.num_items_in_batch then return sum / o.num_items_in_batch end
  return o.reduction == "sum" and sum or sum / count
end

local losses = {
  -- One process: the full logits, F.cross_entropy.
  one_process = function(p, y, o)
    local logits = F.linear(p.hidden, p.weight, p.bias):float()
    local sum = F.cross_entropy(logits, y, { ignore_index = -100, index_base = 0, reduction = "sum" })
    return from_sum(sum, y:ne(-100):sum():item(), o)
  end,
  -- Vocabulary-parallel, unchunked: this rank's logits of every token.
  tp_unchunked = function(p, y, o)
    local logits = F.linear(tp.group:copy_to(p.hidden), p.weight, p.bias)
    local n = o.num_items_in_batch or (o.reduction == "sum" and 1) or nil
    return accel.parallel.vocab_parallel_cross_entropy(logits, y, tp, { num_items_in_batch = n })
  end,
  tp_chunked = function(p, y, o)
    return F.linear_cross_entropy(tp.group:copy_to(p.hidden), p.weight, y, {
      bias = p.bias, index_base = 0, chunk_size = o.chunk_size, reduction = o.reduction,
      num_items_in_batch = o.num_items_in_batch, process_group = tp.group })
  end,
}

-- The loss and gradients of `a` (split or not) against the chunked loss's;
-- returns the largest difference of the loss and of each gradient, relative
-- to the gradient's largest entry when `relative`.
local function differences(reference, split, y, o, run, relative)
  local p, q = leaves(split), leaves(true)
  local expected = run(function() return losses[reference](p, y, o) end)
  local got = run(function() return losses.tp_chunked(q, y, o) end)
  check.equal(got.dtype, "float32", "the chunked loss is float32")
  local d = { loss = math.abs(got:item() - expected:item()) }
  expected:backward()
  got:backward()
  for _, name in ipairs({ "hidden", "weight", "bias" }) do
    local want = p[name].grad
    if not split and name ~= "hidden" then want = slice(want) end
    d[name] = max_diff(q[name].grad, want) / (relative and want:abs():max():item() or 1)
  end
  return d
end

local function plain(f) return f() end
for _, chunk in ipairs({ 1, 5, 0 }) do
  for _, y in ipairs({ { "all targets", targets }, { "5 targets ignored", ignored } }) do
    for _, case in ipairs({ { "one process", "one_process", false }, { "TP unchunked", "tp_unchunked", true } }) do
      local what = string.format("%s, chunks of %s, against %s", y[1], chunk == 0 and "Liger's size" or chunk, case[1])
      local d = differences(case[2], case[3], y[2], { chunk_size = chunk > 0 and chunk or nil }, plain)
      for key, value in pairs(d) do
        check.truthy(value <= 1e-6, string.format("%s: %s within 1e-6 (%.3g)", what, key, value))
      end
    end
  end
end
for _, o in ipairs({ { chunk_size = 4, num_items_in_batch = 40 }, { chunk_size = 6, reduction = "sum" } }) do
  local what = o.reduction and "reduction sum" or "num_items_in_batch 40"
  local d = differences("one_process", false, ignored, o, plain)
  local tol = o.reduction and 1e-5 or 1e-6  -- a sum of 18 losses: float32 rounding of a larger number
  for key, value in pairs(d) do
    check.truthy(value <= tol, string.format("%s: %s within %g (%.3g)", what, key, tol, value))
  end
end

-- Under bfloat16 autocast the products run in bfloat16 and the softmax in
-- float32 in all three; they round at other points. Measured: the same
-- loss, the gradients within 7.5e-3 of their largest entry.
local bf16 = accel.Accelerator{ mixed_precision = "bf16", cpu = true }
local function autocast(f) return bf16:autocast(f) end
for _, case in ipairs({ { "one process", "one_process", false }, { "TP unchunked", "tp_unchunked", true } }) do
  local d = differences(case[2], case[3], ignored, { chunk_size = 5 }, autocast, true)
  if tp.rank == 0 then
    print(string.format("bf16 against %s: loss %.3g, hidden %.3g, weight %.3g, bias %.3g", case[1], d.loss, d.hidden,
                        d.weight, d.bias))
  end
  check.truthy(d.loss <= 1e-5, string.format("bf16 against %s: the loss within 1e-5 (%.3g)", case[1], d.loss))
  for _, key in ipairs({ "hidden", "weight", "bias" }) do
    check.truthy(d[key] <= 1.5e-2, string.format("bf16 against %s: %s's gradient within 1.5e-2 of its largest (%.3g)",
                                               case[1], key, d[key]))
  end
end

check.raises(function()
  F.linear_cross_entropy(hidden0, slice(weight0), targets, { index_base = 0, process_group = "tp" })
end, "a process_group that is none", "option 'process_group'", "ProcessGroup")
check.raises(function()
  F.linear_cross_entropy(hidden0, slice(weight0), targets + V, { index_base = 0, process_group = tp.group })
end, "a target past the whole vocabulary", "outside the vocabulary (0 to 37)")
check.raises(function()
  F.linear_cross_entropy(hidden0, slice(weight0), targets, { index_base = 0, process_group = tp.group,
                                                            lora_A = accel.randn(2, H), lora_B = accel.randn(V / 2, 2) })
end, "LoRA on a split vocabulary", "takes no LoRA adapter")

-- A Llama split over tp 2: model{labels} in training mode gives the
-- one-process model's loss and gradients.
local cfg = { model_type = "llama", vocab_size = 32, hidden_size = 16, intermediate_size = 32, num_hidden_layers = 2,
              num_attention_heads = 4, num_key_value_heads = 2 }
accel.set_seed(1)
local ids = accel.randint(0, 32, { 2, 8 })
local labels = ids:clone()
labels[1][3], labels[2][1], labels[2][6] = -100, -100, -100
local function build()
  accel.set_seed(2)
  local m = accel.models.from_config(cfg)
  m:train()
  return m
end
local reference = build()
local expected = reference{ input_ids = ids, labels = labels, num_items_in_batch = 11, skip_logits = false }.loss
expected:backward()
local ref_grads = {}
for name, param in reference:named_parameters() do ref_grads[name] = param.grad end

local llama = require("accel.models.llama")
for _, head in ipairs({ "colwise", "colwise_gather", "colwise_sequence" }) do
  local sp = head == "colwise_sequence"
  local plan = {}
  for k, v in pairs(llama[sp and "sp_plan" or "tp_plan"]) do plan[k] = v end
  plan.lm_head = head
  local model = accel.parallel.tensor_parallel(build(), acc.mesh, plan, { sequence_parallel = sp })
  local out = model{ input_ids = ids, labels = labels, num_items_in_batch = 11 }
  check.raises(function() return out.logits end, head .. ": the chunked loss keeps no logits", "skip_logits = false")
  check.truthy(math.abs(out.loss:item() - expected:item()) <= 1e-6, string.format(
    "%s: the chunked vocabulary-parallel loss %.9g equals one process's %.9g", head, out.loss:item(), expected:item()))
  out.loss:backward()
  local worst, count = 0, 0
  for name, param in model:named_parameters() do
    local want = ref_grads[name]
    for dim = 1, want:dim() do  -- a split parameter: this rank's slice of the full gradient
      if want:size(dim) ~= param:size(dim) then
        local width = param:size(dim)
        want = want:narrow(dim, tp.rank * width + 1, width)
      end
    end
    worst, count = math.max(worst, max_diff(param.grad, want)), count + 1
  end
  check.equal(count, 21, head .. ": every parameter compared")
  check.truthy(worst <= 1e-6, string.format("%s: every parameter's gradient equals one process's within 1e-6: %.3g",
                                            head, worst))
  if head == "colwise" then
    -- The unchunked loss of split logits is the vocabulary-parallel one.
    local full = model{ input_ids = ids, labels = labels, num_items_in_batch = 11, skip_logits = false }
    check.equal(full.logits:size(3), 16, "colwise: skip_logits = false gives this rank's slice of the logits")
    check.truthy(math.abs(full.loss:item() - expected:item()) <= 1e-6,
                 "colwise: their loss is the vocabulary-parallel loss, one process's")
  end
end
-- Under bfloat16 autocast the split Llama's chunked loss is the one
-- process's unchunked loss under the same autocast, within bfloat16's
-- rounding of the products (measured: 8.2e-7 relative).
local bf16_expected = bf16:autocast(function()
  return reference{ input_ids = ids, labels = labels, skip_logits = false }.loss
end)
local split = accel.parallel.tensor_parallel(build(), acc.mesh, nil)
local bf16_got = bf16:autocast(function() return split{ input_ids = ids, labels = labels }.loss end)
local relative = math.abs(bf16_got:item() - bf16_expected:item()) / bf16_expected:item()
if tp.rank == 0 then print(string.format("bf16 Llama over tp 2: the chunked loss within %.3g relative", relative)) end
check.equal(bf16_got.dtype, "float32", "bf16 Llama over tp 2: a float32 loss")
check.truthy(relative <= 1e-5, string.format("bf16 Llama over tp 2: the chunked loss %.7g is one process's %.7g "
                                             .. "(%.3g relative)", bf16_got:item(), bf16_expected:item(), relative))
check.done("test_vocab_parallel_linear_cross_entropy_2ranks")
