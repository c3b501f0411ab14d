// Attention: scaled dot-product attention, as PyTorch 2's
// torch.nn.functional.scaled_dot_product_attention computes it, and
// multi-head attention, as PyTorch 1.13's multi_head_attention_forward.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <tuple>

namespace accel::nn {

// softmax(q k^T * scale + bias) v, with `blocked` positions (true) excluded
// and dropout on the weights; returns the output and the weights. `bias`
// (float) and `blocked` (bool) may be undefined and broadcast to the scores.
std::tuple<at::Tensor, at::Tensor> attend(const at::Tensor& q, const at::Tensor& k,
                                          const at::Tensor& v, const at::Tensor& bias,
                                          const at::Tensor& blocked, double dropout_p,
                                          double scale);

// [l, s], true above the diagonal: the positions a causal query may not see.
at::Tensor causal_mask(int64_t l, int64_t s, const at::TensorOptions& options);

struct AttentionOptions {
  // Boolean: true where attention is allowed; floating point: added to the
  // scores. Broadcast to (..., L, S).
  c10::optional<at::Tensor> attn_mask;
  bool is_causal = false;  // excludes later positions; not with attn_mask
  double dropout_p = 0.0;  // applied to the weights
  c10::optional<double> scale;  // 1 / sqrt(E) when absent
  // Grouped-query attention, as PyTorch 2.5's: q has H heads at dim -3, k and
  // v have H / G each, which G query heads in a row share.
  bool enable_gqa = false;
};

// q (..., L, E), k (..., S, E), v (..., S, Ev) -> (..., L, Ev).
at::Tensor scaled_dot_product_attention(const at::Tensor& q, const at::Tensor& k,
                                        const at::Tensor& v, const AttentionOptions& options);

// The parameters of multi-head attention, as nn.MultiheadAttention holds
// them: one packed in-projection [3E, E], or separate q/k/v projections
// when keys and values have other widths (kdim, vdim).
struct MultiHeadAttentionWeights {
  c10::optional<at::Tensor> in_proj_weight;
  c10::optional<at::Tensor> in_proj_bias;  // [3E], for either form
  c10::optional<at::Tensor> q_proj_weight, k_proj_weight, v_proj_weight;
  at::Tensor out_proj_weight;
  c10::optional<at::Tensor> out_proj_bias;
};

// Masks follow nn.MultiheadAttention: a boolean key_padding_mask (N, S) or
// attn_mask (L, S) / (N * heads, L, S) is true where attention is NOT
// allowed; float masks are added to the scores.
struct MultiHeadAttentionOptions {
  c10::optional<at::Tensor> key_padding_mask;
  c10::optional<at::Tensor> attn_mask;
  bool is_causal = false;
  double dropout_p = 0.0;
  bool need_weights = true;
  bool average_attn_weights = true;  // over heads
};

// PyTorch 1.13's multi_head_attention_forward on batch-first inputs
// (N, L, E), or unbatched (L, E). Returns the output and the attention
// weights, undefined when need_weights is false. Self-attention (query, key
// and value the same tensor) projects once.
std::tuple<at::Tensor, at::Tensor> multi_head_attention(at::Tensor query, at::Tensor key,
                                                        at::Tensor value, int64_t num_heads,
                                                        const MultiHeadAttentionWeights& weights,
                                                        const MultiHeadAttentionOptions& options);

}  // namespace accel::nn
