-- A Mixtral (mixtral.lua: the Llama decoder whose MLP is a sparse mixture
-- of experts) as a pipeline's layers: decoder_stages.lua's cut and names
-- ({"embed_tokens", "layers.0", ..., "norm", "lm_head"}), each decoder
-- layer's stage routing its tokens to its experts as one process does.
--
-- Decisions:
-- - The router's load-balancing loss (output_router_logits = true, whose
--   loss adds router_aux_loss_coef x aux_loss) is refused. transformers'
--   aux_loss is one function of the whole batch over every layer at once:
--   each expert's share of all top-k picks times its mean router
--   probability, summed. Its gradient reaches each layer's gate scaled by
--   the picks of every layer and every micro-batch, which no stage has
--   when 1F1B runs the first micro-batch's backward (before the last
--   micro-batches' forwards, on stages before it); a loss per micro-batch
--   or per stage (Megatron's) trains, but is not one process's. Without it
--   (output_router_logits = false, the default) the loss and gradients
--   are one process's.
-- - router_jitter_noise, as dropout, draws from each rank's generator: a
--   run with it is not one process's draw for draw.
local args = require("accel.util.args")
local config = require("accel.models.config")
local decoder_stages = require("accel.parallel.pipeline.decoder_stages")

local mixtral_stages = {}

local where = "accel.parallel.pipeline.mixtral_stages"

mixtral_stages.module = decoder_stages.module

-- decoder_stages.of's pieces of `model` (a MixtralForCausalLM).
function mixtral_stages.of(model, options)
  local cfg = type(model) == "table" and model.config
  if cfg and config.get(cfg, "output_router_logits", "boolean", false) then
    args.error(string.format("%s.of: output_router_logits = true in %s adds the router's load-balancing loss, "
                             .. "which counts every layer's expert picks over the whole batch: no stage has them "
                             .. "when the schedule runs the first micro-batch's backward, so it is not cut into "
                             .. "stages; set output_router_logits = false to train through a pipeline without it",
                             where, config.source(cfg)))
  end
  return decoder_stages.of(model, options)
end

return mixtral_stages
