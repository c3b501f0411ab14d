#include "engine/nn/linear.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/record_function.h>
#include <torch/autograd.h>

#include <algorithm>

#ifdef ACCEL_WITH_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

namespace accel::nn {

#ifdef ACCEL_WITH_ONEDNN
namespace {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// A matrix as sgemm reads it: row-major (`N`) or the transpose of a
// row-major one (`T`), with its leading dimension. A tensor that is neither
// (a strided view of both dims) is copied first.
struct Operand {
  Tensor storage;
  char trans;
  int64_t ld;
};

Operand operand(const Tensor& m) {
  const int64_t rows = m.size(0), cols = m.size(1);
  if (m.stride(1) == 1 && m.stride(0) >= cols) return {m, 'N', std::max<int64_t>(m.stride(0), 1)};
  if (m.stride(0) == 1 && m.stride(1) >= rows) return {m, 'T', std::max<int64_t>(m.stride(1), 1)};
  if (cols == 1) return {m, 'N', 1};  // a column: any row stride reads as rows of one
  Tensor packed = m.contiguous();
  return {packed, 'N', std::max<int64_t>(cols, 1)};
}

// a (m, k) times b (k, n), both float32 on the CPU with every size > 0.
// Named in profiler traces, with its shapes, as LibTorch's own products are.
Tensor product(const Tensor& a, const Tensor& b) {
  RECORD_FUNCTION("onednn::sgemm", std::vector<c10::IValue>({a, b}));
  const Operand pa = operand(a), pb = operand(b);
  Tensor out = at::empty({a.size(0), b.size(1)}, a.options());
  const dnnl_status_t status =
      dnnl_sgemm(pa.trans, pb.trans, a.size(0), b.size(1), a.size(1), 1.0f, pa.storage.data_ptr<float>(), pa.ld,
                 pb.storage.data_ptr<float>(), pb.ld, 0.0f, out.data_ptr<float>(), b.size(1));
  TORCH_CHECK(status == dnnl_success, "oneDNN's sgemm failed (status ", static_cast<int>(status), ") for (",
              a.size(0), " x ", a.size(1), ") times (", b.size(0), " x ", b.size(1), ")");
  return out;
}

Tensor forward_product(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  RECORD_FUNCTION("accel::linear", std::vector<c10::IValue>({x, weight}));
  const Tensor rows = x.reshape({-1, x.size(-1)});
  Tensor y = product(rows, weight.t());
  if (bias.defined()) y.add_(bias);
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = weight.size(0);
  return y.view(shape);
}

// x W^T; the bias is added outside, by LibTorch's add (LibTorch 1.13's
// custom functions take no undefined input, and an absent bias is one).
struct LinearFunction : public torch::autograd::Function<LinearFunction> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& weight) {
    ctx->save_for_backward({x, weight});
    return forward_product(x, weight, Tensor());
  }

  // With create_graph (grad mode on in backward) the gradients must carry
  // their own history, which only LibTorch's operators record.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Tensor& x = saved[0];
    const Tensor& weight = saved[1];
    const Tensor g = grads[0].reshape({-1, weight.size(0)});
    const Tensor rows = x.reshape({-1, x.size(-1)});
    const bool differentiable = at::GradMode::is_enabled();
    Tensor gx, gw;
    if (ctx->needs_input_grad(0)) {
      gx = (differentiable ? g.mm(weight) : product(g, weight)).view(x.sizes());
    }
    if (ctx->needs_input_grad(1)) gw = differentiable ? g.t().mm(rows) : product(g.t(), rows);
    return {gx, gw};
  }
};

bool through_onednn(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const auto is_plain_float = [](const Tensor& t) {
    return t.device().is_cpu() && t.layout() == at::kStrided && t.scalar_type() == at::kFloat;
  };
  // Autocast casts linear's inputs in its dispatcher entry: leave it to at::linear.
  if (at::autocast::is_cpu_enabled()) return false;
  if (!is_plain_float(x) || !is_plain_float(weight) || weight.dim() != 2 || x.dim() < 1) return false;
  if (bias.defined() && (!is_plain_float(bias) || bias.dim() != 1 || bias.size(0) != weight.size(0))) return false;
  // Shapes that do not fit, and empty products, get at::linear's handling.
  return x.size(-1) == weight.size(1) && x.numel() > 0 && weight.numel() > 0;
}

}  // namespace
#endif

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias) {
#ifdef ACCEL_WITH_ONEDNN
  // An absent bias may also come as an undefined tensor (from Lua's nil).
  const at::Tensor b = bias.value_or(at::Tensor());
  if (through_onednn(x, weight, b)) {
    const bool tracked = at::GradMode::is_enabled() &&
                         (x.requires_grad() || weight.requires_grad() || (b.defined() && b.requires_grad()));
    if (!tracked) return forward_product(x, weight, b);
    const at::Tensor y = LinearFunction::apply(x, weight);
    return b.defined() ? y + b : y;
  }
#endif
  return at::linear(x, weight, bias);
}

}  // namespace accel::nn
