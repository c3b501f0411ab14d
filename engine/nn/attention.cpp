#include "engine/nn/attention.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <string>

namespace accel::nn {
namespace {

// Whether `other` broadcasts to `target`'s shape, so it can be applied in place.
bool fits(const at::Tensor& target, const at::Tensor& other) {
  return at::infer_size(target.sizes(), other.sizes()) == target.sizes().vec();
}

std::string shape_of(const at::Tensor& t) {
  std::string s;
  for (int64_t d = 0; d < t.dim(); ++d) s += (d ? "x" : "") + std::to_string(t.size(d));
  return "[" + s + "]";
}

}  // namespace

// The scores are updated in place where they can be: matmul saves its
// inputs for backward, not its output.
std::tuple<at::Tensor, at::Tensor> attend(const at::Tensor& q, const at::Tensor& k,
                                          const at::Tensor& v, const at::Tensor& bias,
                                          const at::Tensor& blocked, double dropout_p,
                                          double scale) {
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)).mul_(scale);
  const double inf = std::numeric_limits<double>::infinity();
  if (bias.defined()) scores = fits(scores, bias) ? scores.add_(bias) : scores + bias;
  if (blocked.defined()) {
    scores = fits(scores, blocked) ? scores.masked_fill_(blocked, -inf) : scores.masked_fill(blocked, -inf);
  }
  at::Tensor weights = at::softmax(scores, -1);
  if (dropout_p > 0.0) weights = at::dropout(weights, dropout_p, true);
  return {at::matmul(weights, v), weights};
}

at::Tensor causal_mask(int64_t l, int64_t s, const at::TensorOptions& options) {
  return at::ones({l, s}, options.dtype(at::kBool)).triu(1);
}

at::Tensor scaled_dot_product_attention(const at::Tensor& q, const at::Tensor& k,
                                        const at::Tensor& v, const AttentionOptions& options) {
  TORCH_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2,
              "q, k and v need at least 2 dims (..., L, E), got shapes ",
              shape_of(q), ", ", shape_of(k), ", ", shape_of(v));
  TORCH_CHECK(q.size(-1) == k.size(-1), "q has ", q.size(-1),
              " features per position but k has ", k.size(-1));
  const c10::optional<at::Tensor>& mask = options.attn_mask;
  TORCH_CHECK(!(mask && options.is_causal), "give attn_mask or is_causal, not both");
  at::Tensor bias, blocked;
  if (mask && mask->scalar_type() == at::kBool) {
    blocked = mask->logical_not();
  } else if (mask) {
    bias = *mask;
  }
  if (options.is_causal) blocked = causal_mask(q.size(-2), k.size(-2), q.options());
  const double scale = options.scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  return std::get<0>(attend(q, k, v, bias, blocked, options.dropout_p, scale));
}

}  // namespace accel::nn
