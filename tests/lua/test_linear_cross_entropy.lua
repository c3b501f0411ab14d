-- F.linear_cross_entropy (the chunked loss, engine/nn/linear_cross_entropy.h)
-- equals F.cross_entropy of F.linear's logits: the loss and the gradients of
-- the hidden states, the weight, the bias and a LoRA adapter's A and B,
-- within 1e-6 in float32, for chunks of 1, 3 and 7 tokens and Liger's
-- default, with and without ignored targets, with num_items_in_batch and
-- reduction "sum"; under bfloat16 autocast it equals the unfused path
-- under the same autocast. A Llama with labels in training mode computes
-- its loss this way (no logits kept) and gets the unchunked loss's value and
-- gradients; skip_logits = false gives the logits.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local F = accel.nn.functional

local function max_diff(a, b) return (a - b):abs():max():item() end

local N, H, V, r = 23, 16, 37, 4
accel.set_seed(0)
local hidden0 = accel.randn(N, H)
local weight0 = accel.randn(V, H) * 0.3
local bias0 = accel.randn(V) * 0.1
local A0, B0 = accel.randn(r, H) * 0.2, accel.randn(V, r) * 0.2
local targets = accel.randint(0, V, { N })
local ignored = targets:clone()
for _, i in ipairs({ 1, 4, 5, 11, 23 }) do ignored[i] = -100 end

local function leaves(with_lora)
  local t = { hidden = hidden0:clone():requires_grad_(), weight = weight0:clone():requires_grad_(),
              bias = bias0:clone():requires_grad_() }
  if with_lora then t.A, t.B = A0:clone():requires_grad_(), B0:clone():requires_grad_() end
  return t
end

-- The unfused reference: logits, then cross_entropy (sum / num_items, or mean).
local function reference(p, y, o)
  local logits = F.linear(p.hidden, p.weight, p.bias)
  if p.A then logits = logits + F.linear(F.linear(p.hidden, p.A), p.B) * 2.5 end
  logits = logits:float()
  if o.num_items_in_batch or o.reduction == "sum" then
    local s = F.cross_entropy(logits, y, { ignore_index = -100, index_base = 0, reduction = "sum" })
    return o.num_items_in_batch and s / o.num_items_in_batch or s
  end
  return F.cross_entropy(logits, y, { ignore_index = -100, index_base = 0 })
end

local function chunked(p, y, o)
  return F.linear_cross_entropy(p.hidden, p.weight, y, { bias = p.bias, lora_A = p.A, lora_B = p.B,
                                                         scaling = p.A and 2.5 or nil, index_base = 0,
                                                         chunk_size = o.chunk_size, reduction = o.reduction,
                                                         num_items_in_batch = o.num_items_in_batch })
end

local function compare(what, y, o, with_lora, tol)
  local p, q = leaves(with_lora), leaves(with_lora)
  local expected, got = reference(p, y, o), chunked(q, y, o)
  check.truthy(math.abs(got:item() - expected:item()) <= tol, string.format("%s: loss %.9g equals %.9g", what,
                                                                           got:item(), expected:item()))
  expected:backward()
  got:backward()
  for _, name in ipairs({ "hidden", "weight", "bias", "A", "B" }) do
    if p[name] then
      local d = max_diff(q[name].grad, p[name].grad)
      check.truthy(d <= tol, string.format("%s: the gradient of %s is the unchunked one's within %g: %.3g", what,
                                           name, tol, d))
    end
  end
end

for _, chunk in ipairs({ 1, 3, 7, 0 }) do
  for _, y in ipairs({ { "all targets", targets }, { "5 targets ignored", ignored } }) do
    local label = string.format("%s, chunks of %s", y[1], chunk == 0 and "Liger's size" or tostring(chunk))
    compare(label, y[2], { chunk_size = chunk > 0 and chunk or nil }, false, 1e-6)
    compare(label .. ", LoRA", y[2], { chunk_size = chunk > 0 and chunk or nil }, true, 1e-6)
  end
end
compare("num_items_in_batch 40", ignored, { chunk_size = 4, num_items_in_batch = 40 }, true, 1e-6)
compare("reduction sum", ignored, { chunk_size = 5, reduction = "sum" }, false, 1e-5)

-- Under bfloat16 autocast: the products in bfloat16, the softmax in float32, as the unfused path.
local acc = accel.Accelerator{ mixed_precision = "bf16", cpu = true }
local p, q = leaves(false), leaves(false)
local expected = acc:autocast(function() return reference(p, targets, {}) end)
local got = acc:autocast(function() return chunked(q, targets, { chunk_size = 5 }) end)
check.truthy(got.dtype == "float32", "the loss is float32 under autocast")
check.truthy(math.abs(got:item() - expected:item()) <= 1e-6 * math.max(1, expected:item()),
             string.format("bf16 autocast: loss %.9g equals the unfused %.9g", got:item(), expected:item()))
expected:backward()
got:backward()
for _, name in ipairs({ "hidden", "weight", "bias" }) do
  local scale = p[name].grad:abs():max():item()
  local d = max_diff(q[name].grad, p[name].grad) / scale
  -- Rounded to bfloat16 at other points than the unfused path (measured: up to 1.5e-2 of the largest).
  check.truthy(d <= 3e-2, string.format("bf16 autocast: the gradient of %s within bfloat16 rounding: %.3g", name, d))
end

check.raises(function() F.linear_cross_entropy(hidden0, weight0, accel.LongTensor({ 1, 2 }), { index_base = 0 }) end,
             "targets of the wrong count", "do not hold one target per row")
check.raises(function() F.linear_cross_entropy(hidden0, weight0, targets + V, { index_base = 0 }) end,
             "a target outside the vocabulary", "outside the vocabulary")
check.raises(function() F.linear_cross_entropy(hidden0, weight0, targets, { bogus = 1 }) end, "unknown option",
             "bogus")

-- A Llama with labels: the chunked loss in training mode, equal to the logits' loss.
accel.set_seed(1)
local cfg = { model_type = "llama", vocab_size = 50, hidden_size = 16, intermediate_size = 32, num_hidden_layers = 2,
              num_attention_heads = 2, num_key_value_heads = 1 }
local model = accel.models.from_config(cfg)
local ids = accel.randint(0, 50, { 2, 9 })
local labels = ids:clone()
labels[1][3], labels[2][1] = -100, -100
local out = model{ input_ids = ids, labels = labels }
check.raises(function() return out.logits end, "no logits in training with labels", "skip_logits = false")
local full = model{ input_ids = ids, labels = labels, skip_logits = false }
check.truthy(full.logits ~= nil, "skip_logits = false gives the logits")
check.truthy(math.abs(out.loss:item() - full.loss:item()) <= 1e-6, "the chunked loss equals the logits' loss")
out.loss:backward()
local chunked_grads = {}
for name, param in model:named_parameters() do chunked_grads[name] = param.grad:clone() end
model:zero_grad()
full.loss:backward()
local worst = 0
for name, param in model:named_parameters() do worst = math.max(worst, max_diff(param.grad, chunked_grads[name])) end
check.truthy(worst <= 1e-6, "every parameter's gradient equals the unchunked loss's within 1e-6: " .. worst)
local n = model{ input_ids = ids, labels = labels, num_items_in_batch = 30 }.loss
local n_full = model{ input_ids = ids, labels = labels, num_items_in_batch = 30, skip_logits = false }.loss
check.truthy(math.abs(n:item() - n_full:item()) <= 1e-6, "num_items_in_batch divides both alike")
model:eval()
check.truthy(model{ input_ids = ids, labels = labels }.logits ~= nil, "eval mode keeps the logits")

-- LoRA on lm_head: the adapter joins the chunks.
model:train()
local peft_model = accel.peft.get_peft_model(model, accel.peft.LoraConfig{ r = 4, lora_alpha = 8,
                                                                           target_modules = { "lm_head", "q_proj" } })
local core = require("accel.core")
core.no_grad(function() accel.nn.init.normal_(peft_model.base_model.model.lm_head.lora_B.default.weight, 0, 0.1) end)
local a = peft_model{ input_ids = ids, labels = labels }
local b = peft_model{ input_ids = ids, labels = labels, skip_logits = false }
check.truthy(math.abs(a.loss:item() - b.loss:item()) <= 1e-6, "LoRA on lm_head: the chunked loss equals the logits'")
a.loss:backward()
local lora_grads = {}
for name, param in peft_model:named_parameters() do lora_grads[name] = param.grad:clone() end
peft_model:zero_grad()
b.loss:backward()
worst = 0
for name, param in peft_model:named_parameters() do worst = math.max(worst, max_diff(param.grad, lora_grads[name])) end
check.truthy(worst <= 1e-6, "LoRA on lm_head: the adapters' gradients equal the unchunked loss's: " .. worst)
check.done("test_linear_cross_entropy")
