#include "engine/grad_clipping.h"

#include <ATen/ATen.h>
#include <torch/types.h>  // first: clip_grad.h uses torch::Tensor without including it

#include <torch/nn/utils/clip_grad.h>

#include <algorithm>
#include <cmath>

#include "engine/compat.h"

namespace accel {
namespace {

std::vector<at::Tensor> gradients(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> grads;
  for (const at::Tensor& p : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  return grads;
}

// On a GPU, as PyTorch's clipping does by default there: one multi-tensor
// kernel for all the norms and one for all the scaling, not one per
// parameter each.
bool multi_tensor(const std::vector<at::Tensor>& grads) {
  return ACCEL_TORCH_AT_LEAST(2, 1) && !grads.empty() &&
         std::all_of(grads.begin(), grads.end(), [](const at::Tensor& g) { return g.is_cuda(); });
}

}  // namespace

// Not LibTorch's clip_grad_norm_: it returns the norm as a host double, a
// device sync on every GPU step, where this returns a 0-dim tensor on the
// gradients' device as PyTorch does; and its norms of type 0 and -inf are
// other numbers than this function's.
at::Tensor clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm,
                          double norm_type) {
  at::NoGradGuard no_grad;
  const std::vector<at::Tensor> grads = gradients(params);
  if (grads.empty()) return at::zeros({});
  std::vector<at::Tensor> norms;
  if (multi_tensor(grads)) {
    norms = at::_foreach_norm(grads, norm_type);
  } else {
    for (const at::Tensor& g : grads) norms.push_back(g.norm(norm_type));
  }
  // The norm of all the elements as one vector, as PyTorch documents it: the
  // largest |g| (inf), the smallest (-inf), the count of non-zeros (0: the
  // per-tensor counts add up; PyTorch's own code takes the 0-"norm" of the
  // counts, the number of tensors with a non-zero), or the p-norm of the
  // per-tensor p-norms.
  at::Tensor stacked = at::stack(norms);
  at::Tensor total;
  if (std::isinf(norm_type)) {
    total = norm_type > 0 ? stacked.max() : stacked.min();
  } else if (norm_type == 0) {
    total = stacked.sum();
  } else {
    total = stacked.norm(norm_type);
  }
  scale_to_max_norm(params, total, max_norm);
  return total;
}

void scale_to_max_norm(const std::vector<at::Tensor>& params, const at::Tensor& total, double max_norm) {
  at::NoGradGuard no_grad;
  at::Tensor coefficient = (max_norm / (total + 1e-6)).clamp_max(1.0);
  std::vector<at::Tensor> grads = gradients(params);
#if ACCEL_TORCH_AT_LEAST(2, 1)
  if (multi_tensor(grads)) return at::_foreach_mul_(grads, coefficient);
#endif
  for (at::Tensor& g : grads) g.mul_(coefficient.to(g.dtype()));
}

void clip_grad_value(const std::vector<at::Tensor>& params, double clip_value) {
  TORCH_CHECK(clip_value >= 0, "clip_grad_value: clip value must be non-negative, got ", clip_value);
  torch::nn::utils::clip_grad_value_(params, clip_value);
}

}  // namespace accel
