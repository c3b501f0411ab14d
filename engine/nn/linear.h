// The linear layer, y = x W^T + b, as every nn.Linear and F.linear computes it.
//
// On the CPU in float32 the matrix product goes through oneDNN's sgemm where
// the engine is built with oneDNN (Debian's LibTorch links it; its build has
// it, see CMakeLists.txt): LibTorch's own CPU products go through OpenBLAS
// 0.3.21 there, whose kernels for few rows (a decoding step's batch) are 2-5x
// slower than oneDNN's and whose large products are 7-20% slower
// (bench/linear/RESULTS.md). Everything else
// (other dtypes, GPUs, a CUDA LibTorch, which has MKL) is at::linear.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

namespace accel::nn {

// x (..., in), weight (out, in), bias (out) -> (..., out); differentiable in
// all three, with LibTorch's gradients.
at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias);

}  // namespace accel::nn
