#include "engine/parallel/tensor_parallel_ops.h"

#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
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

HeldGroup* held_group(AutogradContext* ctx) {
  return c10::static_intrusive_pointer_cast<HeldGroup>(ctx->saved_data["group"].toCapsule()).get();
}

void hold_group(AutogradContext* ctx, std::shared_ptr<Communicator> group) {
  ctx->saved_data["group"] = c10::IValue::make_capsule(c10::make_intrusive<HeldGroup>(std::move(group)));
}

// Every rank's `x` joined along `dim`, in rank order.
Tensor all_gathered(const Tensor& x, int64_t dim, Communicator& group) {
  return at::cat(group.all_gather(x.contiguous()), dim);
}

// The sum of every rank's `x`, this rank's part along `dim`.
Tensor reduce_scattered(const Tensor& x, int64_t dim, Communicator& group) {
  const int64_t ranks = group.size();
  const int64_t length = x.size(dim);
  TORCH_CHECK(length % ranks == 0, "sequence parallelism: a tensor of sizes ", x.sizes(), " has length ", length,
              " along the split dim, which does not divide by the group's ", ranks, " ranks");
  // `dim` outermost, so rank r's part is the r-th flat slice; a copy, since
  // reduce_scatter uses its input as scratch.
  Tensor input = x.movedim(dim, 0).clone(at::MemoryFormat::Contiguous);
  std::vector<int64_t> part_sizes = input.sizes().vec();
  part_sizes[0] = length / ranks;
  Tensor part = at::empty(part_sizes, x.options());
  Tensor flat_part = part.view(-1);
  Tensor flat_input = input.view(-1);
  group.reduce_scatter(flat_part, flat_input, ReduceOp::Sum);
  return part.movedim(0, dim).contiguous();
}

struct CopyToGroup : public torch::autograd::Function<CopyToGroup> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, std::shared_ptr<Communicator> group) {
    hold_group(ctx, std::move(group));
    return x.clone();
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {summed(grads[0], *held_group(ctx)->comm), Tensor()};
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
    return all_gathered(x, -1, *group);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const int64_t width = ctx->saved_data["width"].toInt();
    const int64_t rank = ctx->saved_data["rank"].toInt();
    return {grads[0].narrow(-1, rank * width, width).contiguous(), Tensor()};
  }
};

// Forward `there` along a dim of the input, backward `back` along the same
// dim of the gradient: gather_sequence and reduce_scatter_sequence, each the
// other's transpose.
using AlongDim = Tensor (*)(const Tensor&, int64_t, Communicator&);

template <AlongDim there, AlongDim back>
struct SequenceExchange : public torch::autograd::Function<SequenceExchange<there, back>> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, int64_t dim, std::shared_ptr<Communicator> group) {
    ctx->saved_data["dim"] = dim;
    Tensor y = there(x, dim, *group);
    hold_group(ctx, std::move(group));
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {back(grads[0], ctx->saved_data["dim"].toInt(), *held_group(ctx)->comm), Tensor(), Tensor()};
  }
};

using GatherSequence = SequenceExchange<all_gathered, reduce_scattered>;
using ReduceScatterSequence = SequenceExchange<reduce_scattered, all_gathered>;

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

Tensor gather_sequence(const Tensor& x, int64_t dim, std::shared_ptr<Communicator> group) {
  return GatherSequence::apply(x, at::maybe_wrap_dim(dim, x.dim()), std::move(group));
}

Tensor reduce_scatter_sequence(const Tensor& x, int64_t dim, std::shared_ptr<Communicator> group) {
  return ReduceScatterSequence::apply(x, at::maybe_wrap_dim(dim, x.dim()), std::move(group));
}

}  // namespace accel
