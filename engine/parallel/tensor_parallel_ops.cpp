#include "engine/parallel/tensor_parallel_ops.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/custom_class.h>

#include "engine/comm/communicator.h"

namespace accel {
namespace {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The group, kept in an autograd context until backward needs it (saved_data
// holds IValues only).
struct HeldGroup : torch::CustomClassHolder {
  explicit HeldGroup(std::shared_ptr<Communicator> c) : comm(std::move(c)) {}
  std::shared_ptr<Communicator> comm;
};

Tensor summed(const Tensor& x, Communicator& group) {
  Tensor y = x.contiguous().clone();
  group.all_reduce(y, ReduceOp::Sum);
  return y;
}

struct CopyToGroup : public torch::autograd::Function<CopyToGroup> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, std::shared_ptr<Communicator> group) {
    ctx->saved_data["group"] = c10::IValue::make_capsule(c10::make_intrusive<HeldGroup>(std::move(group)));
    return x.clone();
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto held = c10::static_intrusive_pointer_cast<HeldGroup>(ctx->saved_data["group"].toCapsule());
    return {summed(grads[0], *held->comm), Tensor()};
  }
};

struct ReduceFromGroup : public torch::autograd::Function<ReduceFromGroup> {
  static Tensor forward(AutogradContext*, const Tensor& x, std::shared_ptr<Communicator> group) {
    return summed(x, *group);
  }
  static variable_list backward(AutogradContext*, variable_list grads) { return {grads[0], Tensor()}; }
};

struct GatherFromGroup : public torch::autograd::Function<GatherFromGroup> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, std::shared_ptr<Communicator> group) {
    ctx->saved_data["rank"] = static_cast<int64_t>(group->rank());
    ctx->saved_data["width"] = x.size(-1);
    return at::cat(group->all_gather(x.contiguous()), -1);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const int64_t width = ctx->saved_data["width"].toInt();
    const int64_t rank = ctx->saved_data["rank"].toInt();
    return {grads[0].narrow(-1, rank * width, width).contiguous(), Tensor()};
  }
};

}  // namespace

Tensor copy_to_group(const Tensor& x, std::shared_ptr<Communicator> group) {
  return CopyToGroup::apply(x, std::move(group));
}

Tensor reduce_from_group(const Tensor& x, std::shared_ptr<Communicator> group) {
  return ReduceFromGroup::apply(x, std::move(group));
}

Tensor gather_from_group(const Tensor& x, std::shared_ptr<Communicator> group) {
  return GatherFromGroup::apply(x, std::move(group));
}

}  // namespace accel
