// Gradient clipping with PyTorch's clip_grad_norm_ / clip_grad_value_ math.
#pragma once
#include <ATen/core/Tensor.h>

#include <vector>

namespace accel {

// Scales all gradients so their combined `norm_type`-norm is at most
// `max_norm`; returns the norm before clipping (a 0-dim tensor). Parameters
// without a gradient are skipped.
at::Tensor clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm,
                          double norm_type = 2.0);

// Clamps every gradient element into [-clip_value, clip_value].
void clip_grad_value(const std::vector<at::Tensor>& params, double clip_value);

}  // namespace accel
