// Scaled dot-product attention, as PyTorch 2's
// torch.nn.functional.scaled_dot_product_attention computes it, and the
// pieces multi-head attention shares with it.
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
};

// q (..., L, E), k (..., S, E), v (..., S, Ev) -> (..., L, Ev).
at::Tensor scaled_dot_product_attention(const at::Tensor& q, const at::Tensor& k,
                                        const at::Tensor& v, const AttentionOptions& options);

}  // namespace accel::nn
