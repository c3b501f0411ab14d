-- The causal models' loss with labels, computed in chunks of tokens from the
-- last hidden states and the output layer (F.linear_cross_entropy, engine/nn/
-- linear_cross_entropy.h), so that the logits of the whole batch (with a
-- 128k vocabulary the largest activation of fine-tuning) are never held,
-- nor their gradient. When:
--   model{..., labels = ...} on a model in training mode computes the loss
--     this way and gives no logits (reading out.logits is an error that
--     says how to have them), as transformers' Liger integration does;
--   skip_logits = false asks for the logits (and their loss, unchunked);
--     skip_logits = true asks for the chunked loss in eval mode too;
--   a model in eval mode gives logits and their loss, as before.
-- The output layer may be an nn.Linear (with its bias), a LoRA layer around
-- one (its dropout 0: the adapter's A and B join the chunks), the tied
-- embedding's weight, or a tensor-parallel lm_head (a ColwiseLinear, its
-- logits split or gathered): its vocabulary slice's chunks, the loss
-- reduced over the tp group per chunk, the hidden states taken as the
-- layer takes them (copy_to, or the sequence gather). Any other head (an
-- adapter with dropout, a Linear4bit) gets the unchunked loss; a split
-- lm_head's unchunked loss is accel.parallel.vocab_parallel_cross_entropy
-- of its logits. num_items_in_batch divides the sum of the tokens'
-- losses, as transformers' loss does.
local core = require("accel.core")
local F = core.functional
local args = require("accel.util.args")
local Linear = require("accel.nn.linear")

local chunked_loss = {}

-- The head's parts for linear_cross_entropy, or nil when it has none.
local function parts(head)
  if getmetatable(head) == Linear then return { weight = head.weight, bias = head.bias } end
  if head.__name == "ColwiseLinear" then
    return { weight = head.weight, bias = head.bias, process_group = head.tp.group,
             input = function(h) return head:region_input(h) end }
  end
  if head.__name == "LoraLinear" and getmetatable(rawget(head, "base_layer")) == Linear then
    local base = head.base_layer
    local o = { weight = base.weight, bias = base.bias }
    if head.disable_adapters then return o end
    if head.lora_dropout.default.__name ~= "Identity" then return nil end
    o.lora_A, o.lora_B, o.scaling = head.lora_A.default.weight, head.lora_B.default.weight, head.scaling
    -- The adapter computes in its own dtype as PEFT's; the chunks in one dtype: only when they agree.
    if o.lora_A.dtype ~= o.weight.dtype then return nil end
    return o
  end
  return nil
end

local function no_logits()
  args.error("the model computed its loss in chunks and kept no logits (training with labels); "
             .. "call it with skip_logits = false to have them")
end
local skipped_logits = { __index = function(_, key) if key == "logits" then no_logits() end end }

-- logits (or nil), loss (or nil) for hidden states h (B, T, hidden).
function chunked_loss.logits_and_loss(head, h, inputs, training)
  local labels, skip = inputs.labels, inputs.skip_logits
  if skip ~= nil and type(skip) ~= "boolean" then
    args.error("skip_logits must be true or false, got a " .. type(skip))
  end
  local n = inputs.num_items_in_batch
  if n ~= nil and not (type(n) == "number" or type(n) == "userdata") then
    args.error("num_items_in_batch must be a number or a tensor, got a " .. type(n))
  end
  if type(n) == "userdata" then n = n:item() end
  if labels == nil then return head(h), nil end
  if skip == nil then skip = training end
  local p = skip and parts(head)
  if not p then
    local logits = head(h)
    local split = head.__name == "ColwiseLinear" and not head.gather_output and head.tp
    return logits, require("accel.models.causal_lm").loss(logits, labels, n, split)
  end
  if p.input then h = p.input(h) end
  local B, T = h:size(1), h:size(2)
  if type(labels) ~= "userdata" or labels:dim() ~= 2 or labels:size(1) ~= B or labels:size(2) ~= T then
    args.error(string.format("labels must have the shape of input_ids (%d, %d), got %s", B, T,
                             type(labels) == "userdata" and args.shape(labels) or type(labels)))
  end
  if T < 2 then return nil, core.zeros({}, { device = h.device }) * h:sum() end
  return nil, F.linear_cross_entropy(h:narrow(2, 1, T - 1), p.weight, labels:narrow(2, 2, T - 1), {
    bias = p.bias, lora_A = p.lora_A, lora_B = p.lora_B, scaling = p.scaling, index_base = 0,
    num_items_in_batch = n, process_group = p.process_group,
  })
end

-- The output table: logits, loss and the cache; without logits, one whose
-- logits field says why there are none.
function chunked_loss.output(logits, loss, inputs)
  local out = { logits = logits, loss = loss, past_key_values = inputs.past_key_values }
  if logits == nil then setmetatable(out, skipped_logits) end
  return out
end

return chunked_loss
