#include "engine/parallel/ring_shift.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include "engine/comm/communicator.h"
#include "engine/comm/point_to_point.h"
#include "engine/parallel/held_group.h"

namespace accel {
namespace {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// `x` sent `steps` ranks on (1: forward, -1: backward); what arrives from
// the other side.
Tensor turned(const Tensor& x, Communicator& group, int steps) {
  const int size = group.size();
  const int rank = group.rank();
  Tensor out = at::empty_like(x, at::MemoryFormat::Contiguous);
  point_to_point(group).send_recv(x, (rank + steps + size) % size, out, (rank - steps + size) % size);
  return out;
}

struct RingShift : public torch::autograd::Function<RingShift> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, std::shared_ptr<Communicator> group) {
    Tensor out = turned(x, *group, 1);
    hold_group(ctx, std::move(group));
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {turned(grads[0], held_group(ctx), -1), Tensor()};
  }
};

}  // namespace

Tensor ring_shift(const Tensor& x, std::shared_ptr<Communicator> group) {
  if (group->size() == 1) return x;
  return RingShift::apply(x, std::move(group));
}

}  // namespace accel
