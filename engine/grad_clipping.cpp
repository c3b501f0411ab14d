#include "engine/grad_clipping.h"

#include <ATen/ATen.h>
#include <torch/types.h>  // first: clip_grad.h uses torch::Tensor without including it

#include <torch/nn/utils/clip_grad.h>

#include <cmath>

namespace accel {

// Not LibTorch's clip_grad_norm_: it returns the norm as a host double, a
// device sync on every GPU step, where this returns a 0-dim tensor on the
// gradients' device as PyTorch does; and its norms of type 0 and -inf are
// other numbers than this function's.
at::Tensor clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm,
                          double norm_type) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> norms;
  for (const at::Tensor& p : params) {
    if (p.grad().defined()) norms.push_back(p.grad().norm(norm_type));
  }
  if (norms.empty()) return at::zeros({});
  at::Tensor total = std::isinf(norm_type) ? at::stack(norms).max() : at::stack(norms).norm(norm_type);
  scale_to_max_norm(params, total, max_norm);
  return total;
}

void scale_to_max_norm(const std::vector<at::Tensor>& params, const at::Tensor& total, double max_norm) {
  at::NoGradGuard no_grad;
  at::Tensor coefficient = (max_norm / (total + 1e-6)).clamp_max(1.0);
  for (const at::Tensor& p : params) {
    if (p.grad().defined()) const_cast<at::Tensor&>(p.grad()).mul_(coefficient.to(p.grad().dtype()));
  }
}

void clip_grad_value(const std::vector<at::Tensor>& params, double clip_value) {
  TORCH_CHECK(clip_value >= 0, "clip_grad_value: clip value must be non-negative, got ", clip_value);
  torch::nn::utils::clip_grad_value_(params, clip_value);
}

}  // namespace accel
