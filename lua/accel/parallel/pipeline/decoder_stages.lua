-- A causal language model of the Llama family (llama.lua's decoder:
-- llama, mistral without windows, qwen2, and Mixtral's, whose layers hold
-- the experts: mixtral_stages.lua) as a pipeline's layers, for
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
--   in place): built whole, or by acc:build_model with only this rank's
--   stages read from the checkpoint, the rest on meta (stage_loading.lua).
--   Sliding windows are not cut yet.
-- - The loss (loss_fn, loss_share) and tied embeddings (only for a runtime
--   that sums their gradients: options.tied) are causal_lm_pieces.lua's.
local core = require("accel.core")
local nn = require("accel.nn")
local args = require("accel.util.args")
local attention_mask = require("accel.models.attention_mask")
local causal_lm_pieces = require("accel.parallel.pipeline.causal_lm_pieces")

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

local layout = causal_lm_pieces.layout{ where = where, base = "model", first = { "embed_tokens" }, blocks = "layers",
                                        last = { "norm" } }

-- The module behind a layer name of `model`.
decoder_stages.module = layout.module

-- {layer_names, build, loss_fn, loss_share, input_key [, tied]} of `model`
-- (an accel.models causal LM of the Llama family; causal_lm_pieces.lua's
-- pieces, options.tied there).
function decoder_stages.of(model, options)
  local base = type(model) == "table" and model.model
  if not (base and base.embed_tokens and base.layers and base.rotary_emb and model.lm_head) then
    args.error(where .. ".of: expected a causal LM of the Llama family (model.embed_tokens, layers, norm, lm_head)")
  end
  if next(base.windows or {}) then
    args.error(where .. ".of: layers attending within a sliding window are not cut into stages yet")
  end
  return layout.pieces(model, { block = function(layer) return DecoderLayerStage(layer, base.rotary_emb) end }, options)
end

return decoder_stages
