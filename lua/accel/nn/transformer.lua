-- A Transformer encoder layer, as PyTorch's nn.TransformerEncoderLayer but
-- batch-first by default:
--   nn.TransformerEncoderLayer(d_model, nhead, {dim_feedforward = 2048,
--     dropout = 0.1, activation = "relu" | "gelu" | function, layer_norm_eps = 1e-5,
--     batch_first = true, norm_first = false, is_causal = false})
--   layer(src, {src_mask, src_key_padding_mask, is_causal})
-- is_causal (in the options or per call) lets each position attend only to
-- itself and earlier ones. Masks follow nn.MultiheadAttention.
local core = require("accel.core")
local Module = require("accel.nn.module")
local Linear = require("accel.nn.linear")
local LayerNorm = require("accel.nn.layer_norm")
local Dropout = require("accel.nn.dropout").Dropout
local MultiheadAttention = require("accel.nn.multihead_attention")
local args = require("accel.util.args")

local F = core.functional

local TransformerEncoderLayer = Module:extend("TransformerEncoderLayer")

local activations = { relu = F.relu, gelu = F.gelu }

function TransformerEncoderLayer:init(d_model, nhead, options)
  local where = "nn.TransformerEncoderLayer"
  local o = args.options(where, options, { dim_feedforward = 2048, dropout = 0.1, activation = "relu",
                                           layer_norm_eps = 1e-5, batch_first = true, norm_first = false,
                                           is_causal = false },
                         { dim_feedforward = "number", dropout = "number", activation = "string|function",
                           layer_norm_eps = "number", batch_first = "boolean", norm_first = "boolean",
                           is_causal = "boolean" })
  if type(o.activation) == "function" then
    self.activation = o.activation
  elseif activations[o.activation] then
    self.activation = activations[o.activation]
  else
    args.error(string.format("%s: activation must be 'relu', 'gelu' or a function, got %s", where,
                             tostring(o.activation)))
  end
  args.positive_integer(where, "dim_feedforward", o.dim_feedforward)
  -- Built in PyTorch's order, so parameters and state_dict keys come in its order.
  self.self_attn = MultiheadAttention(d_model, nhead, { dropout = o.dropout, batch_first = o.batch_first })
  self.linear1 = Linear(d_model, o.dim_feedforward)
  self.dropout = Dropout(o.dropout)
  self.linear2 = Linear(o.dim_feedforward, d_model)
  self.norm_first = o.norm_first
  self.norm1 = LayerNorm(d_model, { eps = o.layer_norm_eps })
  self.norm2 = LayerNorm(d_model, { eps = o.layer_norm_eps })
  self.dropout1 = Dropout(o.dropout)
  self.dropout2 = Dropout(o.dropout)
  self.is_causal = o.is_causal
end

function TransformerEncoderLayer:self_attention_block(x, mask, padding, causal)
  local out = self.self_attn(x, x, x, { attn_mask = mask, key_padding_mask = padding, is_causal = causal,
                                        need_weights = false })
  return self.dropout1(out)
end

function TransformerEncoderLayer:feed_forward_block(x)
  return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))
end

function TransformerEncoderLayer:forward(src, options)
  local o = args.options("nn.TransformerEncoderLayer:forward", options,
                         { src_mask = args.NONE, src_key_padding_mask = args.NONE, is_causal = args.NONE },
                         { src_mask = "userdata", src_key_padding_mask = "userdata", is_causal = "boolean" })
  local causal = o.is_causal
  if causal == nil then causal = self.is_causal end
  local mask, padding = o.src_mask, o.src_key_padding_mask
  local x = src
  if self.norm_first then
    x = x + self:self_attention_block(self.norm1(x), mask, padding, causal)
    x = x + self:feed_forward_block(self.norm2(x))
  else
    x = self.norm1(x + self:self_attention_block(x, mask, padding, causal))
    x = self.norm2(x + self:feed_forward_block(x))
  end
  return x
end

function TransformerEncoderLayer:__tostring()
  return string.format("TransformerEncoderLayer(d_model %d, %d heads, feedforward %d%s)", self.self_attn.embed_dim,
                       self.self_attn.num_heads, self.linear1.out_features, self.norm_first and ", norm first" or "")
end

return TransformerEncoderLayer
