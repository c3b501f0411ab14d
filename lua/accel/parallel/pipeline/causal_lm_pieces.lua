-- What the causal LMs' cuts into a pipeline's layers share (decoder_stages.lua
-- for the Llama family and Mixtral, gpt2_stages.lua): the layers' names
-- and modules by the model's layout, the token embeddings' stage, the loss
-- and the tied embeddings, so that each architecture's cut says only which
-- of its layers run wrapped (a block making its mask), and this makes its
-- pieces:
--   local layout = causal_lm_pieces.layout{ where = ..., base = "transformer", first = { "wte", "wpe" },
--                                           blocks = "h", last = { "ln_f" } }
--   local pieces = layout.pieces(model, { wpe = PositionStage, block = BlockStage }, { tied = true })
--
-- Decisions:
-- - loss_fn is accel.models' causal loss (the mean over the shifted
--   labels); with equal micro-batches and no -100 labels the micro-batches'
--   mean is the batch's, as the runtime assumes. loss_share(labels, n) is
--   the loss_fn of a micro-batch's share of the batch's loss (the sum of
--   its tokens' losses over n, by default the batch's count of labels that
--   are not -100), for the runtime's loss_reduction = "sum": one process's
--   loss whatever labels are ignored where.
-- - Under tensor parallelism the layers are the split model's own
--   (tensor_parallel.lua keeps every module name); a vocabulary-parallel
--   lm_head's logits are the tp rank's slice, and the loss is computed
--   over the tp group from them.
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

function TokenEmbedding:init(embedding, name, source)
  self.embed_tokens = embedding
  rawset(self, "model_name", name)
  rawset(self, "source", source)
end

function TokenEmbedding:forward(ids) return causal_lm.embed(self.embed_tokens, ids, self.model_name, self.source) end

-- The layers of a causal LM laid out as model[spec.base] holding the
-- spec.first modules (the token embeddings first), the list spec.blocks and
-- the spec.last ones (the final norm), then model.lm_head. spec.where names
-- the cut in errors. Returns {names(model) -> the layer names in order
-- ({first..., blocks .. ".0", ..., last..., "lm_head"}), module(model,
-- name) -> the model's module behind a layer name, pieces(model, wrap,
-- options)}.
function causal_lm_pieces.layout(spec)
  local where, first, blocks = spec.where, spec.first, spec.blocks
  local direct = {}
  for _, name in ipairs(first) do direct[name] = true end
  for _, name in ipairs(spec.last) do direct[name] = true end
  local pattern = "^" .. blocks .. "%.(%d+)$"
  local layout = {}
  function layout.names(model)
    local names = {}
    for _, name in ipairs(first) do names[#names + 1] = name end
    for i = 1, #model[spec.base][blocks] do names[#names + 1] = blocks .. "." .. (i - 1) end
    for _, name in ipairs(spec.last) do names[#names + 1] = name end
    names[#names + 1] = "lm_head"
    return names
  end
  function layout.module(model, name)
    if direct[name] then return model[spec.base][name] end
    if name == "lm_head" then return model.lm_head end
    local i = tonumber(tostring(name):match(pattern))
    local list = model[spec.base][blocks]
    if i and list[i + 1] then return list[i + 1] end
    args.error(string.format("%s: %q is not a layer of this %s", where, tostring(name), model.__name))
  end
  -- {layer_names, build, loss_fn, loss_share, input_key, output_key =
  -- "logits", logits_split (a vocabulary-parallel head) [, tied]} of
  -- `model`: each layer's stage module is wrap[name](module), or for a
  -- block wrap.block(module), or the module itself; the token embeddings'
  -- a TokenEmbedding. options: {tied = true} or nil; `tied` lists {names =
  -- {first[1], "lm_head"}, parameter = the one weight}.
  function layout.pieces(model, wrap, options)
    local base = model[spec.base]
    local embedding = base[first[1]]
    local tied = model.config and model.config.tie_word_embeddings
    if tied and not (options and options.tied) then
      args.error(where .. ".of: tie_word_embeddings puts the embeddings on the first and last stages, which the "
                 .. "stage runtime alone does not share (the Accelerator does: docs/api/parallelism.md)")
    end
    if tied and not rawequal(model.lm_head.weight, embedding.weight) then
      args.error(string.format("%s.of: the config ties the embeddings but lm_head.weight is not %s.weight", where,
                               first[1]))
    end
    local function build(name)
      local m = layout.module(model, name)
      if name == first[1] then return TokenEmbedding(m, base.__name, base.source) end
      local make = wrap[name] or (name:match(pattern) and wrap.block)
      return make and make(m) or m
    end
    -- A vocabulary-parallel head (tensor_parallel's lm_head = "colwise")
    -- leaves each tp rank its slice of the logits: the loss is then
    -- accel.parallel.vocab_parallel_cross_entropy's over the tp group, as
    -- the model's own call computes it (chunked_loss.lua).
    local head = model.lm_head
    local vocab_tp = head.__name == "ColwiseLinear" and not head.gather_output and head.tp or nil
    local function loss_share(labels, num_items)
      local T = labels:size(2)
      if not num_items then num_items = T < 2 and 1 or labels:narrow(2, 2, T - 1):ne(-100):sum():item() end
      return function(logits, mb_labels) return causal_lm.loss(logits, mb_labels, num_items, vocab_tp) end
    end
    return { layer_names = layout.names(model), build = build, input_key = "input_ids", output_key = "logits",
             logits_split = vocab_tp ~= nil, loss_share = loss_share,
             loss_fn = function(logits, labels) return causal_lm.loss(logits, labels, nil, vocab_tp) end,
             tied = tied and { { names = { first[1], "lm_head" }, parameter = embedding.weight } } or nil }
  end
  return layout
end

return causal_lm_pieces
