// The arguments of reduce_scatter and all_gather_into, checked alike by
// every backend before it communicates: both collectives move raw elements
// between flat buffers, so a wrong size would read or write past a tensor's
// end rather than fail inside the transport.
#pragma once
#include <cstdint>

#include "engine/comm/reduce_op.h"

namespace at {
class Tensor;
}

namespace accel {

// `output` and `input` 1-D, contiguous, of one dtype and device, `input`
// holding `size` times output's elements and not sharing memory with
// `output`, and a floating-point dtype for a mean (backends differ in how
// they would round an integer one); throws a c10::Error naming
// reduce_scatter and the sizes otherwise.
void check_reduce_scatter_args(const at::Tensor& output, const at::Tensor& input, int size, ReduceOp op);

// `output` and `input` 1-D, contiguous, of one dtype and device, `output`
// holding `size` times input's elements. True when `input` is rank `rank`'s
// slice of `output` (an all-gather in place); throws when it shares memory
// with `output` any other way, or on the conditions above.
bool check_all_gather_into_args(const at::Tensor& output, const at::Tensor& input, int size, int rank);

// Rank `rank`'s `n` elements of a flat buffer.
at::Tensor rank_slice(const at::Tensor& flat, int rank, int64_t n);

}  // namespace accel
