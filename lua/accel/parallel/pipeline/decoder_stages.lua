-- A causal language model of the Llama family (llama.lua's decoder:
-- llama, mistral without windows, qwen2) as a pipeline's layers, for
-- stage_runtime.build_stages: torchtitan's names, the embeddings and the
-- head counted as layers ({"embed_tokens", "layers.0", ..., "norm",
-- "lm_head"}), each a module of one tensor in and one out, so that the
-- hidden states are what passes between stages:
--   local pieces = decoder_stages.of(model)
--   local stages = stage_runtime.build_stages{ layer_names = pieces.layer_names, build = pieces.build, ... }
--   local pipe = stage_runtime.new{ ..., loss_fn = pieces.loss_fn }
--   pipe:step(input_ids, input_ids)  -- labels: transformers' shifted loss
--
-- Decisions:
-- - A decoder layer's stage makes the rotary angles and the causal mask
--   from its input's shape (positions 0 to T - 1, no padding mask, no
--   packed documents): the rows a pipeline trains on are whole sequences,
--   and nothing but the hidden states then needs to travel.
-- - The pieces are the given model's own modules (its parameters, trained
--   in place); the model is built whole first. Building only a stage's
--   modules of a pretrained checkpoint (init_empty_weights and the
--   big-model loader) is not done yet, nor sliding windows; tied
--   embeddings only for a runtime that sums their gradients (options.tied).
-- - loss_fn is accel.models' causal loss (the mean over the shifted
--   labels); with equal micro-batches and no -100 labels the micro-batches'
--   mean is the batch's, as the runtime assumes. loss_share(labels, n) is
--   the loss_fn of a micro-batch's share of the batch's loss (the sum of
--   its tokens' losses over n, by default the batch's count of labels that
--   are not -100), for the runtime's loss_reduction = "sum": one process's
--   loss whatever labels are ignored where.
local core = require("accel.core")
local nn = require("accel.nn")
local args = require("accel.util.args")
local attention_mask = require("accel.models.attention_mask")
local causal_lm = require("accel.models.causal_lm")

local decoder_stages = {}

local where = "accel.parallel.pipeline.decoder_stages"

-- A decoder layer alone: the rotary angles and causal mask from h's shape.
local DecoderLayerStage = nn.Module:extend("DecoderLayerStage")

function DecoderLayerStage:init(layer, rotary_emb)
  self.layer = layer
  rawset(self, "rotary_emb", rotary_emb)  -- shared, holds no parameters
end

function DecoderLayerStage:forward(h)
  local B, T = h:size(1), h:size(2)
  local positions = core.arange(0, T, { dtype = "int64", device = h.device }):view(1, T):expand(B, T)
  local cos, sin = self.rotary_emb(positions, h.dtype)
  local masks = { full = attention_mask.causal(nil, B, T, 0, { dtype = h.dtype, device = h.device }),
                  positions = positions }
  return self.layer(h, cos, sin, masks, nil)
end

local Embedding = nn.Module:extend("EmbeddingStage")

function Embedding:init(embed_tokens, name, source)
  self.embed_tokens = embed_tokens
  rawset(self, "model_name", name)
  rawset(self, "source", source)
end

function Embedding:forward(ids) return causal_lm.embed(self.embed_tokens, ids, self.model_name, self.source) end

-- The module behind a layer name of `model`.
function decoder_stages.module(model, name)
  local base = model.model
  if name == "embed_tokens" or name == "norm" then return base[name] end
  if name == "lm_head" then return model.lm_head end
  local i = tonumber(name:match("^layers%.(%d+)$"))
  if i and base.layers[i + 1] then return base.layers[i + 1] end
  args.error(string.format("%s: %q is not a layer of this %s", where, tostring(name), model.__name))
end

-- {layer_names, build, loss_fn, loss_share, input_key [, tied]} of `model`
-- (an accel.models causal LM of the Llama family). Tied embeddings are
-- refused unless options.tied: then `tied` lists {names = {"embed_tokens",
-- "lm_head"}, parameter = the one weight}, for a runtime that sums that
-- weight's gradients over the stages holding it (pipelined_model.lua).
function decoder_stages.of(model, options)
  local base = type(model) == "table" and model.model
  if not (base and base.embed_tokens and base.layers and base.rotary_emb and model.lm_head) then
    args.error(where .. ".of: expected a causal LM of the Llama family (model.embed_tokens, layers, norm, lm_head)")
  end
  local tied = model.config and model.config.tie_word_embeddings
  if tied and not (options and options.tied) then
    args.error(where .. ".of: tie_word_embeddings puts the embeddings on the first and last stages, which the "
               .. "stage runtime alone does not share (the Accelerator does: docs/api/parallelism.md)")
  end
  if tied and not rawequal(model.lm_head.weight, base.embed_tokens.weight) then
    args.error(where .. ".of: the config ties the embeddings but lm_head.weight is not embed_tokens.weight")
  end
  if next(base.windows or {}) then
    args.error(where .. ".of: layers attending within a sliding window are not cut into stages yet")
  end
  local names = { "embed_tokens" }
  for i = 1, #base.layers do names[#names + 1] = "layers." .. (i - 1) end
  names[#names + 1] = "norm"
  names[#names + 1] = "lm_head"
  local function build(name)
    local m = decoder_stages.module(model, name)
    if name == "embed_tokens" then return Embedding(m, base.__name, base.source) end
    if name:match("^layers%.") then return DecoderLayerStage(m, base.rotary_emb) end
    return m
  end
  local function loss_share(labels, num_items)
    local T = labels:size(2)
    if not num_items then num_items = T < 2 and 1 or labels:narrow(2, 2, T - 1):ne(-100):sum():item() end
    return function(logits, mb_labels) return causal_lm.loss(logits, mb_labels, num_items) end
  end
  return { layer_names = names, build = build, input_key = "input_ids", loss_share = loss_share,
           loss_fn = function(logits, labels) return causal_lm.loss(logits, labels) end,
           tied = tied and { { names = { "embed_tokens", "lm_head" }, parameter = base.embed_tokens.weight } } or nil }
end

return decoder_stages
