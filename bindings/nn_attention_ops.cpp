// accel.nn.functional, attention: scaled dot-product attention (computed by
// the engine, engine/nn/attention.h) and multi-head attention as PyTorch
// 1.13's multi_head_attention_forward, on batch-first inputs.
#include <cmath>

#include "bindings/op_tables.h"
#include "engine/nn/attention.h"

namespace accel::lua {
namespace {

using T = const at::Tensor&;
using at::Tensor;
using OptTensor = c10::optional<Tensor>;

// The union of two boolean masks (either may be undefined), broadcast.
Tensor either(const Tensor& a, const Tensor& b) {
  if (!a.defined()) return b;
  return b.defined() ? at::logical_or(a, b) : a;
}

// scaled_dot_product_attention(q, k, v, {attn_mask, is_causal, dropout_p, training, scale})
// with PyTorch 2's semantics: a boolean attn_mask is true where attention is
// allowed, a float one is added to the scores.
Tensor scaled_dot_product_attention(lua_State* L, T q, T k, T v, Options o) {
  check_option_names(L, o, {"attn_mask", "is_causal", "dropout_p", "training", "scale"});
  nn::AttentionOptions options;
  options.attn_mask = option_tensor(L, o, "attn_mask");
  options.is_causal = option_boolean(L, o, "is_causal", false);
  options.dropout_p = option_boolean(L, o, "training", true) ? option_number(L, o, "dropout_p", 0.0) : 0.0;
  if (option_present(L, o, "scale")) options.scale = option_number(L, o, "scale", 0.0);
  return nn::scaled_dot_product_attention(q, k, v, options);
}

// multi_head_attention(query, key, value, num_heads, in_proj_weight, in_proj_bias,
//                      out_proj_weight, out_proj_bias, {...}) -> output, weights
// PyTorch 1.13's multi_head_attention_forward on batch-first inputs (N, L, E),
// or unbatched (L, E). Masks follow nn.MultiheadAttention: a boolean
// key_padding_mask (N, S) or attn_mask (L, S) / (N * heads, L, S) is true where
// attention is NOT allowed; float masks are added to the scores.
Pushed multi_head_attention(lua_State* L, Tensor query, Tensor key, Tensor value, int64_t num_heads,
                            OptTensor in_proj_weight, OptTensor in_proj_bias, T out_proj_weight,
                            OptTensor out_proj_bias, Options o) {
  check_option_names(L, o, {"key_padding_mask", "attn_mask", "is_causal", "dropout_p", "training",
                    "need_weights", "average_attn_weights", "q_proj_weight", "k_proj_weight",
                    "v_proj_weight"});
  bool batched = query.dim() == 3;
  const bool self_attention = query.is_same(key) && key.is_same(value);
  TORCH_CHECK(query.dim() == 2 || batched,
              "expected query of shape (N, L, E) or unbatched (L, E), got ", shape_of(query));
  TORCH_CHECK(key.dim() == query.dim() && value.dim() == query.dim(),
              "query, key and value must all be batched or all unbatched, got shapes ",
              shape_of(query), ", ", shape_of(key), ", ", shape_of(value));
  OptTensor key_padding = option_tensor(L, o, "key_padding_mask");
  if (!batched) {
    query = query.unsqueeze(0);
    key = key.unsqueeze(0);
    value = value.unsqueeze(0);
    if (key_padding) key_padding = key_padding->unsqueeze(0);
  }
  const int64_t n = query.size(0), tgt = query.size(1), embed = query.size(2), src = key.size(1);
  TORCH_CHECK(num_heads >= 1 && embed % num_heads == 0, "embed_dim ", embed,
              " is not divisible by num_heads ", num_heads);
  TORCH_CHECK(key.size(0) == n && value.size(0) == n && value.size(1) == src,
              "key and value must have query's batch size and the same length, got shapes ",
              shape_of(query), ", ", shape_of(key), ", ", shape_of(value));
  const int64_t head_dim = embed / num_heads;

  Tensor q, k, v;
  OptTensor wq = option_tensor(L, o, "q_proj_weight");
  if (wq) {
    OptTensor wk = option_tensor(L, o, "k_proj_weight"), wv = option_tensor(L, o, "v_proj_weight");
    TORCH_CHECK(wk && wv, "q_proj_weight needs k_proj_weight and v_proj_weight");
    std::vector<Tensor> b(3);
    if (in_proj_bias) b = in_proj_bias->chunk(3);
    q = at::linear(query, *wq, in_proj_bias ? OptTensor(b[0]) : c10::nullopt);
    k = at::linear(key, *wk, in_proj_bias ? OptTensor(b[1]) : c10::nullopt);
    v = at::linear(value, *wv, in_proj_bias ? OptTensor(b[2]) : c10::nullopt);
  } else {
    TORCH_CHECK(in_proj_weight && in_proj_weight->dim() == 2 && in_proj_weight->size(0) == 3 * embed &&
                    in_proj_weight->size(1) == embed,
                "in_proj_weight must have shape [", 3 * embed, "x", embed, "], got ",
                in_proj_weight ? shape_of(*in_proj_weight) : "nil");
    TORCH_CHECK(key.size(2) == embed && value.size(2) == embed,
                "key and value must have embed_dim ", embed, " features, got shapes ",
                shape_of(key), ", ", shape_of(value));
    if (self_attention) {  // one projection serves q, k and v
      auto parts = at::linear(query, *in_proj_weight, in_proj_bias).chunk(3, -1);
      q = parts[0], k = parts[1], v = parts[2];
    } else {
      auto w = in_proj_weight->chunk(3);
      std::vector<Tensor> b(3);
      if (in_proj_bias) b = in_proj_bias->chunk(3);
      q = at::linear(query, w[0], in_proj_bias ? OptTensor(b[0]) : c10::nullopt);
      k = at::linear(key, w[1], in_proj_bias ? OptTensor(b[1]) : c10::nullopt);
      v = at::linear(value, w[2], in_proj_bias ? OptTensor(b[2]) : c10::nullopt);
    }
  }
  // (N, L, H * D) -> (N, H, L, D)
  auto heads = [&](const Tensor& t, int64_t len) {
    return t.reshape({n, len, num_heads, head_dim}).transpose(1, 2);
  };
  q = heads(q, tgt), k = heads(k, src), v = heads(v, src);

  // Float masks add up to one bias and boolean ones to one blocked mask, both
  // broadcastable to the scores (N, H, L, S).
  Tensor bias, blocked;
  auto add_mask = [&](const Tensor& m) {
    if (m.scalar_type() == at::kBool) {
      blocked = either(blocked, m);
    } else {
      bias = bias.defined() ? bias + m : m;
    }
  };
  OptTensor attn_mask = option_tensor(L, o, "attn_mask");
  if (attn_mask) {
    Tensor m = *attn_mask;
    TORCH_CHECK(m.scalar_type() == at::kBool || m.is_floating_point(),
                "attn_mask must be bool or floating point, got ", dtype_name(m.scalar_type()));
    if (m.dim() == 2) {
      TORCH_CHECK(m.size(0) == tgt && m.size(1) == src, "the 2-D attn_mask has shape ",
                  shape_of(m), ", but should be [", tgt, "x", src, "]");
    } else {
      TORCH_CHECK(m.dim() == 3 && m.size(0) == n * num_heads && m.size(1) == tgt && m.size(2) == src,
                  "the attn_mask has shape ", shape_of(m), ", but should be [", tgt, "x",
                  src, "] or [", n * num_heads, "x", tgt, "x", src, "]");
      m = m.view({n, num_heads, tgt, src});
    }
    add_mask(m);
  }
  if (option_boolean(L, o, "is_causal", false)) add_mask(nn::causal_mask(tgt, src, q.options()));
  if (key_padding) {
    Tensor m = *key_padding;
    TORCH_CHECK(m.dim() == 2 && m.size(0) == n && m.size(1) == src,
                "key_padding_mask has shape ", shape_of(m), ", but should be [", n, "x", src, "]");
    add_mask(m.view({n, 1, 1, src}));
  }

  double dropout_p = option_boolean(L, o, "training", true) ? option_number(L, o, "dropout_p", 0.0) : 0.0;
  auto [attended, weights] =
      nn::attend(q, k, v, bias, blocked, dropout_p, 1.0 / std::sqrt(static_cast<double>(head_dim)));
  Tensor out = at::linear(attended.transpose(1, 2).reshape({n, tgt, embed}), out_proj_weight, out_proj_bias);
  if (!batched) out = out.squeeze(0);
  if (!option_boolean(L, o, "need_weights", true)) return Pushed{push(L, out)};
  if (option_boolean(L, o, "average_attn_weights", true)) weights = weights.mean(1);
  if (!batched) weights = weights.squeeze(0);
  return Pushed{push(L, std::make_tuple(out, weights))};
}

}  // namespace

std::vector<Binding> nn_attention_bindings() {
  return {
      bind("scaled_dot_product_attention", scaled_dot_product_attention),
      bind("multi_head_attention", multi_head_attention),
  };
}

}  // namespace accel::lua
