#include "engine/nn/float8_linear.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include "engine/compat.h"
#include "engine/gpu.h"

namespace accel::nn {

#if defined(ACCEL_WITH_CUDA) && ACCEL_TORCH_AT_LEAST(2, 1)

namespace {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// A tensor in float8 `type` with its scale: value = float8 value * inverse.
struct Scaled {
  Tensor data;
  Tensor inverse;  // float32, 0-dim: what _scaled_mm multiplies back
};

// Dynamic per-tensor scaling (torchao's): the largest magnitude maps to the
// format's largest finite value; an all-zero tensor keeps scale 1.
Scaled to_float8(const Tensor& t, at::ScalarType type) {
  const double largest = type == at::kFloat8_e4m3fn ? 448.0 : 57344.0;
  Tensor amax = t.abs().amax().to(at::kFloat).clamp_min(1e-12);
  Tensor scale = largest / amax;
  Tensor data = (t.to(at::kFloat) * scale).clamp(-largest, largest).to(type);
  return {data, scale.reciprocal()};
}

// a (m, k) row-major times b (k, n) column-major, as _scaled_mm wants them.
Tensor scaled_mm(const Scaled& a, const Scaled& b_column_major, at::ScalarType out, const c10::optional<Tensor>& bias = {}) {
  return at::_scaled_mm(a.data, b_column_major.data, a.inverse, b_column_major.inverse, bias, {}, out);
}

// The same matrix laid out column-major: the transpose of a contiguous transpose.
Scaled column_major(const Scaled& s) { return {s.data.t().contiguous().t(), s.inverse}; }

struct Float8LinearFunction : public torch::autograd::Function<Float8LinearFunction> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& weight, const Tensor& bias) {
    const int64_t in = weight.size(1), out = weight.size(0);
    Tensor rows = x.reshape({-1, in});
    Scaled xs = to_float8(rows, at::kFloat8_e4m3fn);
    Scaled ws = to_float8(weight, at::kFloat8_e4m3fn);
    // weight (out, in) row-major is weight^T (in, out) column-major.
    Tensor y = scaled_mm(xs, {ws.data.t(), ws.inverse}, at::kBFloat16,
                         bias.defined() ? c10::optional<Tensor>(bias.to(at::kBFloat16)) : c10::nullopt);
    ctx->save_for_backward({xs.data, xs.inverse, ws.data, ws.inverse});
    ctx->saved_data["has_bias"] = bias.defined();
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    ctx->saved_data["w_dtype"] = static_cast<int64_t>(weight.scalar_type());
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = out;
    return y.view(shape);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const Scaled xs{saved[0], saved[1]}, ws{saved[2], saved[3]};
    const auto x_dtype = static_cast<at::ScalarType>(ctx->saved_data["x_dtype"].toInt());
    const auto w_dtype = static_cast<at::ScalarType>(ctx->saved_data["w_dtype"].toInt());
    const int64_t out = ws.data.size(0), in = ws.data.size(1);
    Tensor g = grads[0].reshape({-1, out});
    Scaled gs = to_float8(g, at::kFloat8_e5m2);
    // dx (n, in) = g (n, out) @ weight (out, in)
    Tensor grad_x = scaled_mm(gs, column_major(ws), at::kBFloat16).to(x_dtype);
    // dw (out, in) = g^T (out, n) @ x (n, in)
    Tensor grad_w = scaled_mm({gs.data.t().contiguous(), gs.inverse}, column_major(xs), at::kFloat).to(w_dtype);
    Tensor grad_b = ctx->saved_data["has_bias"].toBool() ? g.to(at::kFloat).sum(0) : Tensor();
    std::vector<int64_t> shape = grads[0].sizes().vec();
    shape.back() = in;
    return {grad_x.view(shape), grad_w, grad_b};
  }
};

}  // namespace

std::string float8_unavailable(int device) {
  if (gpu::count() == 0) return "no GPU is visible to this process";
  const gpu::DeviceFacts facts = gpu::devices().at(static_cast<size_t>(device));
  if (facts.major * 10 + facts.minor < 89) {
    return "cuda:" + std::to_string(device) + " (" + facts.name + ", compute capability " +
           std::to_string(facts.major) + "." + std::to_string(facts.minor) +
           ") has no float8 units; they need compute capability 8.9 or newer (Ada, Hopper)";
  }
  return "";
}

at::Tensor float8_linear(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias) {
  TORCH_CHECK(weight.dim() == 2 && x.dim() >= 1 && x.size(-1) == weight.size(1), "float8 linear: input ",
              x.sizes(), " does not fit weight ", weight.sizes());
  TORCH_CHECK(weight.size(0) % 16 == 0 && weight.size(1) % 16 == 0, "float8 linear: weight ", weight.sizes(),
              " must have sizes that are multiples of 16");
  TORCH_CHECK(x.numel() / weight.size(1) % 16 == 0, "float8 linear: the input's ", x.numel() / weight.size(1),
              " rows must be a multiple of 16");
  TORCH_CHECK(x.is_cuda() && weight.is_cuda(), "float8 linear: tensors must be on a GPU");
  const std::string why = float8_unavailable(weight.get_device());
  TORCH_CHECK(why.empty(), "float8 linear: ", why);
  return Float8LinearFunction::apply(x, weight, bias.value_or(at::Tensor()));
}

#else

std::string float8_unavailable(int) {
  return gpu::compiled() ? "this LibTorch has no float8 matrix products (it needs 2.1 or newer)"
                         : "this build of accel has no CUDA (build it with scripts/build-cuda.sh)";
}

at::Tensor float8_linear(const at::Tensor&, const at::Tensor&, const c10::optional<at::Tensor>&) {
  TORCH_CHECK(false, "float8 linear: ", float8_unavailable(0));
}

#endif

}  // namespace accel::nn
