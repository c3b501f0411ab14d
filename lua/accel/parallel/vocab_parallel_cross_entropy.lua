-- Cross-entropy over logits split along the vocabulary across the tp group
-- (Megatron-LM's vocab_parallel_cross_entropy): no rank ever holds a row of
-- full logits. logits (..., V/tp) are this rank's slice, columns
-- [r * V/tp, (r+1) * V/tp), as a ColwiseLinear lm_head gives them; labels
-- (...) are 0-based token ids (as the pretrained models and tokenizers
-- count), ignore_index (default -100) skipped. Returns the mean over the
-- labels not ignored (or their sum divided by num_items_in_batch, as
-- transformers' loss), the same on every tp rank, equal to
-- F.cross_entropy of the full logits. accel.nn.functional.linear_cross_entropy
-- with process_group computes the same loss in chunks of tokens from the
-- hidden states, never holding the slice's logits of all tokens.
--
-- Per row: the largest logit over all ranks (all-reduce max, no gradient:
-- it only keeps exp() in range, and cancels), then the sum of exp over all
-- ranks and the target's logit, found on one rank and zero elsewhere, each
-- summed over the group by reduce_from (all-reduce forward, identity
-- backward): every rank's gradient is then that of its own columns.
local args = require("accel.util.args")

local where = "accel.parallel.vocab_parallel_cross_entropy"

return function(logits, labels, tp, options)
  local o = args.options(where, options, { ignore_index = -100, num_items_in_batch = args.NONE },
                         { ignore_index = "number", num_items_in_batch = "number" })
  if labels.dtype ~= "int64" then
    args.error(string.format("%s: labels must be int64 token ids, got %s", where, labels.dtype))
  end
  local width = logits:size(-1)
  local x = logits:reshape(-1, width)
  -- In float32, as F.cross_entropy computes under autocast: bfloat16 logits
  -- (a loss computed inside acc:autocast) would sum the exponentials, and
  -- all-reduce them, with 8 bits of mantissa.
  if x.dtype == "bfloat16" or x.dtype == "float16" then x = x:float() end
  local y = labels:reshape(-1)
  if x:size(1) ~= y:size(1) then
    args.error(string.format("%s: %d rows of logits but %d labels", where, x:size(1), y:size(1)))
  end
  local first = tp.rank * width
  local maxes = x:detach():amax(-1):contiguous()
  tp:all_reduce(maxes, "max")
  local z = x - maxes:unsqueeze(-1)
  local sum_exp = tp.group:reduce_from(z:exp():sum(-1))
  local mine = y:ge(first):logical_and(y:lt(first + width))
  local column = (y - first):clamp(0, width - 1) + 1  -- 1-based, as gather takes it
  local picked = z:gather(2, column:unsqueeze(-1)):squeeze(-1) * mine:to(z.dtype)
  local target = tp.group:reduce_from(picked)
  local counted = y:ne(o.ignore_index):to(z.dtype)
  return ((sum_exp:log() - target) * counted):sum() / (o.num_items_in_batch or counted:sum())
end
