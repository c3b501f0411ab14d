// tostring(t): the text PyTorch's repr gives for the same tensor.
#pragma once

#include <ATen/ATen.h>

#include <string>

namespace accel::lua {

// `tensor([[1., 2.],\n        [3., 4.]])`: PyTorch's printing rules
// (precision 4, scientific notation when the magnitudes call for it, long
// tensors summarised with `...`), with suffixes for a dtype other than
// float32/int64/bool, a device other than the CPU, and autograd state.
std::string tensor_repr(const at::Tensor& t);

}  // namespace accel::lua
