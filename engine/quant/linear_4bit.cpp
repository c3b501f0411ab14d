#include "engine/quant/linear_4bit.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include "engine/nn/linear.h"

namespace accel::quant {
namespace {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// x W^T with W decoded on the spot. Saved for backward: the weight's own
// tensors (the module's storage, nothing new) and its sizes.
struct FourBitProduct : public torch::autograd::Function<FourBitProduct> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const FourBitWeight& weight) {
    ctx->save_for_backward({weight.packed, weight.absmax, weight.quant_map, weight.nested_absmax,
                            weight.nested_quant_map});
    ctx->saved_data["blocksize"] = weight.blocksize;
    ctx->saved_data["nested_blocksize"] = weight.nested_blocksize;
    ctx->saved_data["nested_offset"] = weight.nested_offset;
    ctx->saved_data["shape"] = c10::IValue(weight.shape);
    return nn::linear(x, dequantize_4bit(weight, x.scalar_type()), c10::nullopt);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
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
    const Tensor& g = grads[0];
    // dx = g W (g (..., out) times W (out, in)).
    return {nn::linear(g, dequantize_4bit(weight, g.scalar_type()).t(), c10::nullopt), Tensor()};
  }
};

}  // namespace

at::Tensor linear_4bit(const at::Tensor& x, const FourBitWeight& weight, const c10::optional<at::Tensor>& bias,
                       at::ScalarType compute_dtype) {
  TORCH_CHECK(weight.shape.size() == 2, "Linear4bit: the weight must be 2-D, got shape ",
              c10::IntArrayRef(weight.shape));
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) == weight.shape[1], "Linear4bit: input ", x.sizes(),
              " does not fit a weight of shape ", c10::IntArrayRef(weight.shape), " (in_features ", weight.shape[1],
              ")");
  Tensor y = FourBitProduct::apply(x.to(compute_dtype), weight);
  if (bias) y = y + bias->to(compute_dtype);
  return y.to(x.scalar_type());
}

}  // namespace accel::quant
