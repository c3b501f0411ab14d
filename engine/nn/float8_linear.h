// A linear layer computed in float8, as torchao's Float8Linear with dynamic
// per-tensor scaling: the input and the weight are scaled so that their
// largest magnitude meets float8 e4m3's largest value (448) and cast to
// e4m3; the output comes from one scaled matrix product on the GPU's float8
// units (at::_scaled_mm), in bfloat16. Backward casts the incoming gradient
// to e5m2 (more range, less precision, as gradients need) and computes the
// input's and the weight's gradients as two more scaled products; the
// bias's gradient is a plain sum. Mixed precision "fp8" puts it in place of
// every nn.Linear whose sizes the float8 products take (multiples of 16),
// with bfloat16 autocast elsewhere.
//
// Needs LibTorch 2.x with CUDA and a GPU with float8 units (compute
// capability 8.9 or newer: Ada, Hopper and later); elsewhere each use
// fails saying which of these is missing.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <string>

namespace accel::nn {

// x (..., in), weight (out, in), bias (out) -> (..., out) in bfloat16;
// differentiable in all three.
at::Tensor float8_linear(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias);

// "" when this process can compute in float8 on GPU `device`, else why not.
std::string float8_unavailable(int device);

}  // namespace accel::nn
