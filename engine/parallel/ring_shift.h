// One turn of a ring over a group, as an autograd function: every rank
// sends its `x` to the next group rank and returns the one the previous
// rank sent (rank r gets rank r - 1's, rank 0 the last rank's). Backward
// turns the other way: the gradient of what rank r received goes back to
// rank r - 1, whose `x` it was. Context parallelism passes keys and values
// around the cp group with it (engine/parallel/ring_attention.h), and
// autograd derives the backward of ring attention from it. Over the group's
// point-to-point exchange (engine/comm/point_to_point.h); the group is held
// (shared) until backward has run. Every group rank calls it, in the same
// order; a group of one rank gets `x` back.
#pragma once
#include <ATen/core/Tensor.h>

#include <memory>

namespace accel {

class Communicator;

at::Tensor ring_shift(const at::Tensor& x, std::shared_ptr<Communicator> group);

}  // namespace accel
