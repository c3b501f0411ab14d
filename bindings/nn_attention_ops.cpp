// accel.nn.functional, attention: the options tables of scaled dot-product
// and multi-head attention, read here and computed by the engine
// (engine/nn/attention.h).
#include "bindings/op_tables.h"
#include "engine/nn/attention.h"

namespace accel::lua {
namespace {

using T = const at::Tensor&;
using at::Tensor;
using OptTensor = c10::optional<Tensor>;

// dropout_p, or 0 when training = false.
double dropout_p(lua_State* L, const Options& o) {
  return option_boolean(L, o, "training", true) ? option_number(L, o, "dropout_p", 0.0) : 0.0;
}

// scaled_dot_product_attention(q, k, v, {attn_mask, is_causal, dropout_p, training, scale,
// enable_gqa}) with PyTorch 2's semantics: a boolean attn_mask is true where
// attention is allowed, a float one is added to the scores.
Tensor scaled_dot_product_attention(lua_State* L, T q, T k, T v, Options o) {
  check_option_names(L, o, {"attn_mask", "is_causal", "dropout_p", "training", "scale", "enable_gqa"});
  nn::AttentionOptions options;
  options.attn_mask = option_tensor(L, o, "attn_mask");
  options.is_causal = option_boolean(L, o, "is_causal", false);
  options.dropout_p = dropout_p(L, o);
  if (option_present(L, o, "scale")) options.scale = option_number(L, o, "scale", 0.0);
  options.enable_gqa = option_boolean(L, o, "enable_gqa", false);
  return nn::scaled_dot_product_attention(q, k, v, options);
}

// multi_head_attention(query, key, value, num_heads, in_proj_weight, in_proj_bias,
//                      out_proj_weight, out_proj_bias, {...}) -> output[, weights]
Pushed multi_head_attention(lua_State* L, Tensor query, Tensor key, Tensor value, int64_t num_heads,
                            OptTensor in_proj_weight, OptTensor in_proj_bias, T out_proj_weight,
                            OptTensor out_proj_bias, Options o) {
  check_option_names(L, o, {"key_padding_mask", "attn_mask", "is_causal", "dropout_p", "training",
                    "need_weights", "average_attn_weights", "q_proj_weight", "k_proj_weight",
                    "v_proj_weight"});
  nn::MultiHeadAttentionWeights weights{in_proj_weight,
                                        in_proj_bias,
                                        option_tensor(L, o, "q_proj_weight"),
                                        option_tensor(L, o, "k_proj_weight"),
                                        option_tensor(L, o, "v_proj_weight"),
                                        out_proj_weight,
                                        out_proj_bias};
  nn::MultiHeadAttentionOptions options;
  options.key_padding_mask = option_tensor(L, o, "key_padding_mask");
  options.attn_mask = option_tensor(L, o, "attn_mask");
  options.is_causal = option_boolean(L, o, "is_causal", false);
  options.dropout_p = dropout_p(L, o);
  options.need_weights = option_boolean(L, o, "need_weights", true);
  options.average_attn_weights = option_boolean(L, o, "average_attn_weights", true);
  auto [out, attention] = nn::multi_head_attention(query, key, value, num_heads, weights, options);
  if (!options.need_weights) return Pushed{push(L, out)};
  return Pushed{push(L, std::make_tuple(out, attention))};
}

}  // namespace

std::vector<Binding> nn_attention_bindings() {
  return {
      bind("scaled_dot_product_attention", scaled_dot_product_attention),
      bind("multi_head_attention", multi_head_attention),
  };
}

}  // namespace accel::lua
