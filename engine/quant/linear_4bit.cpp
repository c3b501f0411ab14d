#include "engine/quant/linear_4bit.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <memory>
#include <utility>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/nn/linear.h"
#include "engine/parallel/held_group.h"

namespace accel::quant {
namespace {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The weight's tensors (the module's storage, nothing new) and its sizes,
// saved for backward.
void save_weight(AutogradContext* ctx, const FourBitWeight& weight) {
  ctx->save_for_backward({weight.packed, weight.absmax, weight.quant_map, weight.nested_absmax,
                          weight.nested_quant_map});
  ctx->saved_data["blocksize"] = weight.blocksize;
  ctx->saved_data["nested_blocksize"] = weight.nested_blocksize;
  ctx->saved_data["nested_offset"] = weight.nested_offset;
  ctx->saved_data["shape"] = c10::IValue(weight.shape);
}

FourBitWeight saved_weight(AutogradContext* ctx) {
  const variable_list saved = ctx->get_saved_variables();
  FourBitWeight weight;
  weight.packed = saved[0];
  weight.absmax = saved[1];
  weight.quant_map = saved[2];
  weight.nested_absmax = saved[3];
  weight.nested_quant_map = saved[4];
  weight.blocksize = ctx->saved_data["blocksize"].toInt();
  weight.nested_blocksize = ctx->saved_data["nested_blocksize"].toInt();
  weight.nested_offset = ctx->saved_data["nested_offset"].toDouble();
  weight.shape = ctx->saved_data["shape"].toIntVector();
  return weight;
}

Tensor product(const Tensor& x, const FourBitWeight& weight) {
  return nn::linear(x, dequantize_4bit(weight, x.scalar_type()), c10::nullopt);
}

// dx = g W (g (..., out) times W (out, in)).
Tensor input_gradient(const Tensor& g, const FourBitWeight& weight) {
  return nn::linear(g, dequantize_4bit(weight, g.scalar_type()).t(), c10::nullopt);
}

// x W^T with W decoded on the spot.
struct FourBitProduct : public torch::autograd::Function<FourBitProduct> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const FourBitWeight& weight) {
    save_weight(ctx, weight);
    return product(x, weight);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {input_gradient(grads[0], saved_weight(ctx)), Tensor()};
  }
};

// The same from this rank's shard: W gathered for the product and again
// for backward; only the shard is saved.
struct ShardedFourBitProduct : public torch::autograd::Function<ShardedFourBitProduct> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const FourBitShard& shard,
                        std::shared_ptr<Communicator> group) {
    save_weight(ctx, shard.part);
    ctx->saved_data["quant_storage"] = static_cast<int64_t>(shard.quant_storage);
    ctx->saved_data["ranks"] = shard.ranks;
    const Tensor y = product(x, gather_four_bit(shard, *group));
    hold_group(ctx, std::move(group));
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    FourBitShard shard;
    shard.part = saved_weight(ctx);
    shard.quant_storage = static_cast<at::ScalarType>(ctx->saved_data["quant_storage"].toInt());
    shard.ranks = ctx->saved_data["ranks"].toInt();
    return {input_gradient(grads[0], gather_four_bit(shard, held_group(ctx))), Tensor(), Tensor()};
  }
};

void check_input(const Tensor& x, const std::vector<int64_t>& shape) {
  TORCH_CHECK(shape.size() == 2, "Linear4bit: the weight must be 2-D, got shape ", c10::IntArrayRef(shape));
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) == shape[1], "Linear4bit: input ", x.sizes(),
              " does not fit a weight of shape ", c10::IntArrayRef(shape), " (in_features ", shape[1], ")");
}

Tensor with_bias(Tensor y, const Tensor& x, const c10::optional<Tensor>& bias, at::ScalarType compute_dtype) {
  if (bias) y = y + bias->to(compute_dtype);
  return y.to(x.scalar_type());
}

}  // namespace

at::Tensor linear_4bit(const at::Tensor& x, const FourBitWeight& weight, const c10::optional<at::Tensor>& bias,
                       at::ScalarType compute_dtype) {
  check_input(x, weight.shape);
  return with_bias(FourBitProduct::apply(x.to(compute_dtype), weight), x, bias, compute_dtype);
}

at::Tensor linear_4bit(const at::Tensor& x, const FourBitShard& weight, std::shared_ptr<Communicator> group,
                       const c10::optional<at::Tensor>& bias, at::ScalarType compute_dtype) {
  check_input(x, weight.part.shape);
  check_four_bit_shard(weight, "Linear4bit");
  TORCH_CHECK(group, "Linear4bit: a sharded weight needs its group");
  return with_bias(ShardedFourBitProduct::apply(x.to(compute_dtype), weight, std::move(group)), x, bias,
                   compute_dtype);
}

}  // namespace accel::quant
