// Megatron-LM's conjugate operators of tensor parallelism, as autograd
// functions over a tensor-parallel group (a device mesh's tp dim):
//
//   copy_to_group      forward identity,   backward all-reduce (sum)  Megatron's f
//   reduce_from_group  forward all-reduce, backward identity          Megatron's g
//   gather_from_group  forward all-gather on the last dim, backward this rank's slice
//
// A column-parallel linear takes its input through copy_to_group (each rank
// computes its slice of the outputs from the whole input, so the input's
// gradient is the sum of every rank's part); a row-parallel linear sends its
// partial output through reduce_from_group (the full output is the sum of
// every rank's part, and each rank's part gets the whole gradient). The
// functions hold the group (shared) until their backward has run.
#pragma once
#include <ATen/core/Tensor.h>

#include <memory>

namespace accel {

class Communicator;

at::Tensor copy_to_group(const at::Tensor& x, std::shared_ptr<Communicator> group);
at::Tensor reduce_from_group(const at::Tensor& x, std::shared_ptr<Communicator> group);
// Every rank's `x` (the same shape on each) side by side along the last dim,
// in group rank order.
at::Tensor gather_from_group(const at::Tensor& x, std::shared_ptr<Communicator> group);

}  // namespace accel
