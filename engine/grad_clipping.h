// Gradient clipping with PyTorch's clip_grad_norm_ / clip_grad_value_ math.
#pragma once
#include <ATen/core/Tensor.h>

#include <vector>

namespace accel {

// Scales all gradients so their combined `norm_type`-norm is at most
// `max_norm`; returns the norm before clipping (a 0-dim tensor). The norm is
// that of every gradient element together, viewed as one vector (as
// PyTorch's documentation has it): for 0 the count of non-zero elements,
// for -inf the smallest |g|, for inf the largest. (PyTorch's code takes
// the 0-norm of the per-tensor counts instead, the number of tensors that
// hold a non-zero; every other type agrees.) Parameters without a gradient
// are skipped.
at::Tensor clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm,
                          double norm_type = 2.0);

// Multiplies every gradient of `params` by min(1, max_norm / (total + 1e-6)):
// clip_grad_norm's scaling, also for a norm found across ranks (sharded data
// parallel, where each rank holds a slice of the gradients).
void scale_to_max_norm(const std::vector<at::Tensor>& params, const at::Tensor& total, double max_norm);

// Clamps every gradient element into [-clip_value, clip_value].
void clip_grad_value(const std::vector<at::Tensor>& params, double clip_value);

}  // namespace accel
