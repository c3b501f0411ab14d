-- Multi-head attention, as PyTorch's nn.MultiheadAttention but batch-first
-- by default:
--   local mha = nn.MultiheadAttention(embed_dim, num_heads,
--                                     {dropout = 0, bias = true, batch_first = true, kdim, vdim})
--   local out, weights = mha(query, key, value, {key_padding_mask, attn_mask,
--                                                is_causal, need_weights = true,
--                                                average_attn_weights = true})
-- key and value default to query (self-attention). Boolean masks are true
-- where attention is NOT allowed (key_padding_mask (N, S), attn_mask (L, S)
-- or (N * num_heads, L, S)); float masks are added to the scores.
-- Parameters: in_proj_weight (3E x E, Xavier-uniform) or q/k/v_proj_weight
-- when kdim/vdim differ from embed_dim, in_proj_bias (zeros), and out_proj
-- (a Linear whose bias starts at zero).
local core = require("accel.core")
local Module = require("accel.nn.module")
local Linear = require("accel.nn.linear")
local args = require("accel.util.args")
local init = require("accel.nn.initialization")

local MultiheadAttention = Module:extend("MultiheadAttention")

function MultiheadAttention:init(embed_dim, num_heads, options)
  local where = "nn.MultiheadAttention"
  args.positive_integer(where, "embed_dim", embed_dim)
  args.positive_integer(where, "num_heads", num_heads)
  if embed_dim % num_heads ~= 0 then
    args.error(string.format("%s: embed_dim %d is not divisible by num_heads %d", where, embed_dim, num_heads))
  end
  local o = args.options(where, options, { dropout = 0, bias = true, batch_first = true, kdim = args.NONE,
                                           vdim = args.NONE },
                         { dropout = "number", bias = "boolean", batch_first = "boolean", kdim = "number",
                           vdim = "number" })
  self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim / num_heads
  self.dropout = args.probability(where, "dropout", o.dropout)
  self.batch_first = o.batch_first
  self.kdim = o.kdim and args.positive_integer(where, "kdim", o.kdim) or embed_dim
  self.vdim = o.vdim and args.positive_integer(where, "vdim", o.vdim) or embed_dim
  self.same_dims = self.kdim == embed_dim and self.vdim == embed_dim

  local function xavier(rows, cols)
    return init.xavier_uniform_(core.empty(rows, cols)):requires_grad_()
  end
  if self.same_dims then
    self.in_proj_weight = xavier(3 * embed_dim, embed_dim)
  else
    self.q_proj_weight = xavier(embed_dim, embed_dim)
    self.k_proj_weight = xavier(embed_dim, self.kdim)
    self.v_proj_weight = xavier(embed_dim, self.vdim)
  end
  if o.bias then self.in_proj_bias = core.zeros(3 * embed_dim, { requires_grad = true }) end
  self.out_proj = Linear(embed_dim, embed_dim, o.bias)
  if o.bias then init.zeros_(self.out_proj.bias) end
end

local forward_defaults = { key_padding_mask = args.NONE, attn_mask = args.NONE, is_causal = false,
                           need_weights = true, average_attn_weights = true }
local forward_types = { key_padding_mask = "userdata", attn_mask = "userdata", is_causal = "boolean",
                        need_weights = "boolean", average_attn_weights = "boolean" }

function MultiheadAttention:forward(query, key, value, options)
  local o = args.options("nn.MultiheadAttention:forward", options, forward_defaults, forward_types)
  key = key or query
  value = value or key
  if not self.batch_first and query:dim() == 3 then
    -- (L, N, E) in and out; one transpose serves tensors passed more than once.
    local q = query:transpose(1, 2)
    local k = key == query and q or key:transpose(1, 2)
    local v = (value == key and k) or (value == query and q) or value:transpose(1, 2)
    query, key, value = q, k, v
  end
  local out, weights = core.functional.multi_head_attention(query, key, value, self.num_heads,
    self.in_proj_weight, self.in_proj_bias, self.out_proj.weight, self.out_proj.bias, {
      key_padding_mask = o.key_padding_mask,
      attn_mask = o.attn_mask,
      is_causal = o.is_causal,
      dropout_p = self.dropout,
      training = self.training,
      need_weights = o.need_weights,
      average_attn_weights = o.average_attn_weights,
      q_proj_weight = self.q_proj_weight,
      k_proj_weight = self.k_proj_weight,
      v_proj_weight = self.v_proj_weight,
    })
  if not self.batch_first and query:dim() == 3 then out = out:transpose(1, 2) end
  return out, weights
end

function MultiheadAttention:__tostring()
  return string.format("MultiheadAttention(%d, %d heads%s)", self.embed_dim, self.num_heads,
                       self.batch_first and "" or ", sequence first")
end

return MultiheadAttention
