// Arithmetic, comparison, pointwise math, reductions and products.
// Dims are 1-based (`Dim`); indices that reductions return are 1-based too.
#include "bindings/op_tables.h"

namespace accel::lua {
namespace {

using T = const at::Tensor&;
using at::Tensor;

// 0-based indices from LibTorch, 1-based for Lua.
Tensor one_based(Tensor indices) { return indices.add_(1); }

std::tuple<Tensor, Tensor> extremum(T t, c10::optional<Dim> dim, c10::optional<bool> keepdim,
                                    bool is_max) {
  if (!dim) return {is_max ? t.max() : t.min(), Tensor()};
  auto [values, indices] = is_max ? t.max(dim->value, keepdim.value_or(false))
                                  : t.min(dim->value, keepdim.value_or(false));
  return {values, one_based(indices)};
}

template <class Reduce>
Tensor reduce_over(T t, c10::optional<Dims> dims, c10::optional<bool> keepdim, Reduce reduce) {
  return reduce(t, dims ? at::IntArrayRef(dims->value) : at::IntArrayRef(), keepdim.value_or(false));
}

}  // namespace

std::vector<Binding> tensor_math_bindings() {
  return {
      // Operators: numbers on either side are wrapped as PyTorch does, so
      // `2 * t` and `t * 2` keep t's dtype.
      bind("__add", [](Operand a, Operand b) { return at::add(a.value, b.value); }),
      bind("__sub", [](Operand a, Operand b) { return at::sub(a.value, b.value); }),
      bind("__mul", [](Operand a, Operand b) { return at::mul(a.value, b.value); }),
      bind("__div", [](Operand a, Operand b) { return at::div(a.value, b.value); }),
      bind("__pow", [](Operand a, Operand b) { return at::pow(a.value, b.value); }),
      bind("__unm", [](T a) { return at::neg(a); }),

      bind("add", [](T a, Operand b, c10::optional<double> alpha) {
        return at::add(a, b.value, alpha.value_or(1.0));
      }),
      bind("sub", [](T a, Operand b, c10::optional<double> alpha) {
        return at::sub(a, b.value, alpha.value_or(1.0));
      }),
      bind("mul", [](T a, Operand b) { return at::mul(a, b.value); }),
      bind("div", [](T a, Operand b) { return at::div(a, b.value); }),
      bind("pow", [](T a, Operand b) { return at::pow(a, b.value); }),
      bind("add_", [](Tensor a, Operand b, c10::optional<double> alpha) {
        return a.add_(b.value, alpha.value_or(1.0));
      }),
      bind("sub_", [](Tensor a, Operand b, c10::optional<double> alpha) {
        return a.sub_(b.value, alpha.value_or(1.0));
      }),
      bind("mul_", [](Tensor a, Operand b) { return a.mul_(b.value); }),
      bind("div_", [](Tensor a, Operand b) { return a.div_(b.value); }),
      bind("neg", [](T a) { return at::neg(a); }),
      bind("abs", [](T a) { return at::abs(a); }),
      bind("exp", [](T a) { return at::exp(a); }),
      bind("log", [](T a) { return at::log(a); }),
      bind("sqrt", [](T a) { return at::sqrt(a); }),
      bind("sin", [](T a) { return at::sin(a); }),
      bind("cos", [](T a) { return at::cos(a); }),
      bind("tanh", [](T a) { return at::tanh(a); }),
      bind("sigmoid", [](T a) { return at::sigmoid(a); }),
      bind("relu", [](T a) { return at::relu(a); }),
      bind("clamp", [](T a, c10::optional<double> lo, c10::optional<double> hi) {
        return at::clamp(a, lo ? c10::optional<at::Scalar>(*lo) : c10::nullopt,
                         hi ? c10::optional<at::Scalar>(*hi) : c10::nullopt);
      }),

      bind("eq", [](T a, Operand b) { return at::eq(a, b.value); }),
      bind("ne", [](T a, Operand b) { return at::ne(a, b.value); }),
      bind("lt", [](T a, Operand b) { return at::lt(a, b.value); }),
      bind("le", [](T a, Operand b) { return at::le(a, b.value); }),
      bind("gt", [](T a, Operand b) { return at::gt(a, b.value); }),
      bind("ge", [](T a, Operand b) { return at::ge(a, b.value); }),

      bind("sum", [](T t, c10::optional<Dims> dims, c10::optional<bool> keepdim) {
        return dims ? reduce_over(t, dims, keepdim, [](T x, at::IntArrayRef d, bool k) {
          return at::sum(x, d, k);
        })
                    : at::sum(t);
      }),
      bind("mean", [](T t, c10::optional<Dims> dims, c10::optional<bool> keepdim) {
        return dims ? reduce_over(t, dims, keepdim, [](T x, at::IntArrayRef d, bool k) {
          return at::mean(x, d, k);
        })
                    : at::mean(t);
      }),
      bind("prod", [](T t, c10::optional<Dim> dim, c10::optional<bool> keepdim) {
        return dim ? at::prod(t, dim->value, keepdim.value_or(false)) : at::prod(t);
      }),
      bind("max", [](T t, c10::optional<Dim> dim, c10::optional<bool> keepdim) {
        return extremum(t, dim, keepdim, true);
      }),
      bind("min", [](T t, c10::optional<Dim> dim, c10::optional<bool> keepdim) {
        return extremum(t, dim, keepdim, false);
      }),
      bind("argmax", [](T t, c10::optional<Dim> dim, c10::optional<bool> keepdim) {
        return one_based(at::argmax(t, dim ? c10::optional<int64_t>(dim->value) : c10::nullopt,
                                    keepdim.value_or(false)));
      }),
      bind("argmin", [](T t, c10::optional<Dim> dim, c10::optional<bool> keepdim) {
        return one_based(at::argmin(t, dim ? c10::optional<int64_t>(dim->value) : c10::nullopt,
                                    keepdim.value_or(false)));
      }),

      bind("matmul", [](T a, T b) { return at::matmul(a, b); }),
      bind("mm", [](T a, T b) { return at::mm(a, b); }),
      bind("bmm", [](T a, T b) { return at::bmm(a, b); }),
      bind("dot", [](T a, T b) { return at::dot(a, b); }),
  };
}

}  // namespace accel::lua
