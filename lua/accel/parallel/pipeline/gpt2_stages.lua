-- A GPT-2 (gpt2.lua's GPT2LMHeadModel) as a pipeline's layers, for
-- stage_runtime.build_stages and the Accelerator (pipeline_parallel.lua),
-- as decoder_stages.lua cuts the Llama family: the model's own module names,
-- the embeddings and the head counted as layers ({"wte", "wpe", "h.0", ...,
-- "ln_f", "lm_head"}), each one tensor in and one out:
--   wte      the token embeddings (ids in, hidden states out)
--   wpe      adds the learned position embeddings and the embedding
--            dropout (transformer.drop), as GPT2Model's forward does
--   h.N      a block, with the causal mask made from its input's shape
--   ln_f, lm_head as they are (lm_head tied to wte unless
--            tie_word_embeddings is false: its gradient summed over the
--            first and last stages, causal_lm_pieces.lua)
--
-- Decisions:
-- - As decoder_stages.lua's: positions 0 to T - 1, no padding mask or
--   packed documents, so only hidden states travel; the pieces are the
--   given model's own modules (built whole, or by stages:
--   stage_loading.lua); the loss is
--   causal_lm_pieces.lua's.
-- - wte and wpe are two layers, as they are two modules: a cut may put
--   them on two stages (the token embeddings then travel).
local core = require("accel.core")
local nn = require("accel.nn")
local args = require("accel.util.args")
local attention_mask = require("accel.models.attention_mask")
local gpt2 = require("accel.models.gpt2")
local causal_lm_pieces = require("accel.parallel.pipeline.causal_lm_pieces")

local gpt2_stages = {}

local where = "accel.parallel.pipeline.gpt2_stages"

-- The position embeddings added to the token embeddings h, then the dropout.
local PositionStage = nn.Module:extend("PositionEmbeddingStage")

function PositionStage:init(wpe, drop, name, source)
  self.wpe = wpe
  self.drop = drop
  rawset(self, "model_name", name)
  rawset(self, "source", source)
end

function PositionStage:forward(h)
  local T = h:size(2)
  local positions = core.arange(0, T, { dtype = "int64", device = h.device }):view(1, T)
  return self.drop(h + gpt2.embed_positions(self.wpe, positions, self.model_name, self.source))
end

-- A block alone: the causal mask from h's shape.
local BlockStage = nn.Module:extend("GPT2BlockStage")

function BlockStage:init(block)
  self.block = block
end

function BlockStage:forward(h)
  local mask = attention_mask.causal(nil, h:size(1), h:size(2), 0, { dtype = h.dtype, device = h.device })
  return self.block(h, mask, nil)
end

local layout = causal_lm_pieces.layout{ where = where, base = "transformer", first = { "wte", "wpe" }, blocks = "h",
                                        last = { "ln_f" } }

-- The module behind a layer name of `model`.
gpt2_stages.module = layout.module

-- {layer_names, build, loss_fn, loss_share, input_key [, tied]} of `model`
-- (a GPT2LMHeadModel; causal_lm_pieces.lua's pieces, options.tied there).
function gpt2_stages.of(model, options)
  local base = type(model) == "table" and model.transformer
  if not (base and base.wte and base.wpe and base.h and base.ln_f and model.lm_head) then
    args.error(where .. ".of: expected a GPT2LMHeadModel (transformer.wte, wpe, h, ln_f, and lm_head)")
  end
  return layout.pieces(model, { wpe = function(wpe) return PositionStage(wpe, base.drop, base.__name, base.source) end,
                                block = BlockStage }, options)
end

return gpt2_stages
