// Megatron-LM's conjugate operators of tensor parallelism, as autograd
// functions over a tensor-parallel group (a device mesh's tp dim):
//
//   copy_to_group      forward identity,   backward all-reduce (sum)  Megatron's f
//   reduce_from_group  forward all-reduce, backward identity          Megatron's g
//   gather_from_group  forward all-gather on the last dim, backward this rank's slice
//   gather_sequence          forward all-gather on a dim, backward reduce-scatter on it
//   reduce_scatter_sequence  forward reduce-scatter on a dim, backward all-gather on it
//
// A column-parallel linear takes its input through copy_to_group (each rank
// computes its slice of the outputs from the whole input, so the input's
// gradient is the sum of every rank's part); a row-parallel linear sends its
// partial output through reduce_from_group (the full output is the sum of
// every rank's part, and each rank's part gets the whole gradient).
//
// Sequence parallelism (Megatron-LM's) keeps the activations between those
// regions split over the sequence dim across the group: gather_sequence
// enters a column-parallel region (each rank's gradient of the whole
// sequence is partial, so backward sums the ranks' and keeps this rank's
// part: a reduce-scatter), reduce_scatter_sequence leaves a row-parallel one
// (the partial outputs summed, each rank keeping its part of the sequence).
// The functions hold the group (shared) until their backward has run.
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
// Every rank's `x` (the same shape on each) joined along `dim` (0-based,
// negative from the end), in group rank order.
at::Tensor gather_sequence(const at::Tensor& x, int64_t dim, std::shared_ptr<Communicator> group);
// The sum of every rank's `x` (the same shape on each), this rank's part of
// it along `dim`: part r of size(dim) / group size. A length that does not
// divide by the group's size is refused, naming both.
at::Tensor reduce_scatter_sequence(const at::Tensor& x, int64_t dim, std::shared_ptr<Communicator> group);

}  // namespace accel
