-- What the causal LMs' cuts into a pipeline's layers share (decoder_stages.lua
-- for the Llama family and Mixtral, gpt2_stages.lua): the token embeddings'
-- stage, the loss and the tied embeddings, so that each architecture's cut
-- gives its layer names and how to build each, and this makes its pieces:
--   causal_lm_pieces.of(model, { where = ..., names = {...}, build = fn(name),
--                                embedding = the token nn.Embedding, options = {tied = true} })
--
-- Decisions:
-- - loss_fn is accel.models' causal loss (the mean over the shifted
--   labels); with equal micro-batches and no -100 labels the micro-batches'
--   mean is the batch's, as the runtime assumes. loss_share(labels, n) is
--   the loss_fn of a micro-batch's share of the batch's loss (the sum of
--   its tokens' losses over n, by default the batch's count of labels that
--   are not -100), for the runtime's loss_reduction = "sum": one process's
--   loss whatever labels are ignored where.
-- - Tied embeddings (the config's tie_word_embeddings) put the one weight
--   in the first stage's embeddings and the last stage's lm_head: refused
--   unless options.tied, for a runtime that sums that weight's gradients
--   over the stages holding it (pipelined_model.lua); the stage runtime
--   alone does not.
local nn = require("accel.nn")
local args = require("accel.util.args")
local causal_lm = require("accel.models.causal_lm")

local causal_lm_pieces = {}

-- The token embeddings alone: ids in, hidden states out; an id outside the
-- vocabulary is an error naming the model and its config.
local TokenEmbedding = nn.Module:extend("EmbeddingStage")
causal_lm_pieces.TokenEmbedding = TokenEmbedding

function TokenEmbedding:init(embedding, name, source)
  self.embed_tokens = embedding
  rawset(self, "model_name", name)
  rawset(self, "source", source)
end

function TokenEmbedding:forward(ids) return causal_lm.embed(self.embed_tokens, ids, self.model_name, self.source) end

-- {layer_names, build, loss_fn, loss_share, input_key [, tied]} of `model`
-- from spec = {where (for errors), names (its layers in order, the first
-- the token embeddings', the last "lm_head"), build(name), embedding (the
-- token nn.Embedding), options ({tied = true} or nil)}; `tied` lists
-- {names = {first, "lm_head"}, parameter = the one weight}.
function causal_lm_pieces.of(model, spec)
  local tied = model.config and model.config.tie_word_embeddings
  if tied and not (spec.options and spec.options.tied) then
    args.error(spec.where .. ".of: tie_word_embeddings puts the embeddings on the first and last stages, which the "
               .. "stage runtime alone does not share (the Accelerator does: docs/api/parallelism.md)")
  end
  if tied and not rawequal(model.lm_head.weight, spec.embedding.weight) then
    args.error(string.format("%s.of: the config ties the embeddings but lm_head.weight is not %s.weight", spec.where,
                             spec.names[1]))
  end
  local function loss_share(labels, num_items)
    local T = labels:size(2)
    if not num_items then num_items = T < 2 and 1 or labels:narrow(2, 2, T - 1):ne(-100):sum():item() end
    return function(logits, mb_labels) return causal_lm.loss(logits, mb_labels, num_items) end
  end
  return { layer_names = spec.names, build = spec.build, input_key = "input_ids", loss_share = loss_share,
           loss_fn = function(logits, labels) return causal_lm.loss(logits, labels) end,
           tied = tied and { { names = { spec.names[1], "lm_head" }, parameter = spec.embedding.weight } } or nil }
end

return causal_lm_pieces
