-- What every causal language model of accel.models shares: the loss with
-- labels (transformers' shifted language-model loss: position t predicts
-- label t + 1; labels of -100 are ignored; the mean over the rest, in
-- float32), and the checks on the token ids a model is given.
local core = require("accel.core")
local F = core.functional
local args = require("accel.util.args")

local causal_lm = {}

local function check_labels(labels, B, T)
  if type(labels) ~= "userdata" or labels:dim() ~= 2 or labels:size(1) ~= B or labels:size(2) ~= T then
    args.error(string.format("labels must have the shape of input_ids (%d, %d), got %s", B, T, type(labels) == "userdata" and args.shape(labels) or type(labels)))
  end
end

-- num_items_in_batch (transformers'): the sum of the tokens' losses is
-- divided by it instead of by this batch's count of labels. vocab_tp: the
-- tp mesh dim the logits' vocabulary is split over (a ColwiseLinear
-- lm_head's slice), for accel.parallel.vocab_parallel_cross_entropy.
function causal_lm.loss(logits, labels, num_items_in_batch, vocab_tp)
  local B, T, V = logits:size(1), logits:size(2), logits:size(3)
  check_labels(labels, B, T)
  if T < 2 then return core.zeros({}, { device = logits.device }) * logits:sum() end
  if vocab_tp then
    return require("accel.parallel.vocab_parallel_cross_entropy")(logits:narrow(2, 1, T - 1),
      labels:narrow(2, 2, T - 1), vocab_tp, { num_items_in_batch = num_items_in_batch })
  end
  local shifted = logits:narrow(2, 1, T - 1):float():reshape(-1, V)
  local targets = labels:narrow(2, 2, T - 1):reshape(-1)
  if num_items_in_batch then
    return F.cross_entropy(shifted, targets, { ignore_index = -100, index_base = 0, reduction = "sum" })
           / num_items_in_batch
  end
  return F.cross_entropy(shifted, targets, { ignore_index = -100, index_base = 0 })
end

-- The causal models' forward with labels (chunked_loss.lua): the loss in
-- chunks without the logits, or the logits and their loss.
function causal_lm.logits_and_loss(head, h, inputs, training)
  return require("accel.models.chunked_loss").logits_and_loss(head, h, inputs, training)
end
function causal_lm.output(logits, loss, inputs)
  return require("accel.models.chunked_loss").output(logits, loss, inputs)
end

local known_inputs = { input_ids = true, attention_mask = true, labels = true, position_ids = true,
                       past_key_values = true, logits_to_keep = true, skip_logits = true, num_items_in_batch = true }

-- The inputs table of a model call: known keys only, input_ids an integer
-- (B, T) tensor of token ids (0-based, as the checkpoint's files count
-- them), the masks and labels of its shape.
function causal_lm.check_inputs(inputs, where)
  if type(inputs) ~= "table" then
    args.error(string.format("%s: call the model with a table {input_ids = ..., attention_mask = ..., labels = ...}, "
                             .. "got a %s", where, type(inputs)))
  end
  for key in pairs(inputs) do
    if not known_inputs[key] then
      args.error(string.format("%s: unknown input '%s' (known: attention_mask, input_ids, labels, logits_to_keep, "
                               .. "num_items_in_batch, past_key_values, position_ids, skip_logits)", where,
                               tostring(key)))
    end
  end
  local ids = inputs.input_ids
  if type(ids) ~= "userdata" then
    args.error(string.format("%s: input_ids must be a tensor of token ids, got a %s", where, type(ids)))
  end
  if ids:dim() ~= 2 then
    args.error(string.format("%s: input_ids must be (batch, sequence), got shape %s", where, args.shape(ids)))
  end
  if ids:is_floating_point() then
    args.error(string.format("%s: input_ids must be an integer tensor (token ids), got %s; "
                             .. "make one with accel.LongTensor or t:long()", where, ids.dtype))
  end
  local mask = inputs.attention_mask
  if mask ~= nil then
    local past = inputs.past_key_values and inputs.past_key_values:length() or 0
    if type(mask) ~= "userdata" or mask:dim() ~= 2 or mask:size(1) ~= ids:size(1)
       or mask:size(2) ~= past + ids:size(2) then
      args.error(string.format("%s: attention_mask must be (batch, past + sequence) = (%d, %d), got %s", where,
                               ids:size(1), past + ids:size(2), type(mask) == "userdata" and args.shape(mask)
                               or type(mask)))
    end
  end
end

-- The hidden states lm_head turns into logits: all, or with
-- inputs.logits_to_keep = k the last k positions, as transformers'
-- logits_to_keep (generate asks for 1: the vocabulary projection of every
-- prompt position is most of a prefill's work otherwise).
function causal_lm.kept_positions(h, inputs, where)
  local k = inputs.logits_to_keep
  if k == nil then return h end
  local T = h:size(2)
  if type(k) ~= "number" or k % 1 ~= 0 or k < 1 then
    args.error(string.format("%s: logits_to_keep must be a positive whole number, got %s", where, tostring(k)))
  end
  if inputs.labels ~= nil then args.error(where .. ": logits_to_keep and labels together: the loss needs every position") end
  return k >= T and h or h:narrow(2, T - k + 1, k)
end

-- The embeddings of token ids through `embedding` (an nn.Embedding with
-- index_base 0); an id outside the vocabulary is an error naming it, the
-- vocabulary's size and the config it comes from.
function causal_lm.embed(embedding, ids, where, source)
  local ok, h = pcall(embedding, ids)
  if not ok then
    local id = tostring(h):match("id (%-?%d+) is out of range")
    if not id then error(h, 0) end
    args.error(string.format("%s: token id %s is outside the vocabulary (ids 0 to %d: vocab_size %d in %s)",
                             where, id, embedding.num_embeddings - 1, embedding.num_embeddings, source))
  end
  return h
end

return causal_lm
