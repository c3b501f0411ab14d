// Arithmetic: operators, binary ops with numbers on either side, pointwise
// math and their in-place forms. In-place ops return the tensor they were
// called on (the same Lua value), as PyTorch returns self.
#include "bindings/op_tables.h"

namespace accel::lua {
namespace {

using T = const at::Tensor&;
using at::Tensor;

// A Lua number as a Scalar that stays integral when it is, so integer
// tensors keep their dtype (alpha, fill values), as Python ints do.
at::Scalar number(double v) {
  if (v == static_cast<double>(static_cast<int64_t>(v))) return at::Scalar(static_cast<int64_t>(v));
  return at::Scalar(v);
}

at::Scalar alpha_of(const c10::optional<double>& alpha) { return number(alpha.value_or(1.0)); }

// div's `{rounding_mode = "trunc" | "floor"}`; absent is true division.
c10::optional<c10::string_view> rounding_mode(lua_State* L, const Options& o) {
  check_option_names(L, o, {"rounding_mode"});
  if (!option_present(L, o, "rounding_mode")) return c10::nullopt;
  std::string mode = option_string(L, o, "rounding_mode", "");
  if (mode == "trunc") return c10::string_view("trunc");
  if (mode == "floor") return c10::string_view("floor");
  throw ArgError("option 'rounding_mode' must be 'trunc' or 'floor', got '" + mode + "'");
}

// clamp's bounds: numbers keep the Scalar overload (and the tensor's dtype
// rules), tensors use the elementwise one.
bool is_number(const Operand& o) { return o.value->unsafeGetTensorImpl()->is_wrapped_number(); }
bool is_number(const c10::optional<Operand>& o) { return !o || is_number(*o); }
c10::optional<at::Scalar> bound_scalar(const c10::optional<Operand>& o) {
  if (!o) return c10::nullopt;
  return o->value->item();
}
c10::optional<Tensor> bound_tensor(const c10::optional<Operand>& o) {
  if (!o) return c10::nullopt;
  return *o->value;
}
Tensor clamp(T t, const c10::optional<Operand>& lo, const c10::optional<Operand>& hi) {
  if (is_number(lo) && is_number(hi)) return at::clamp(t, bound_scalar(lo), bound_scalar(hi));
  return at::clamp(t, bound_tensor(lo), bound_tensor(hi));
}
void clamp_in_place(Tensor t, const c10::optional<Operand>& lo, const c10::optional<Operand>& hi) {
  if (is_number(lo) && is_number(hi)) {
    t.clamp_(bound_scalar(lo), bound_scalar(hi));
  } else {
    t.clamp_(bound_tensor(lo), bound_tensor(hi));
  }
}

}  // namespace

std::vector<Binding> tensor_math_bindings() {
  return {
      // Operators: numbers on either side are wrapped as PyTorch does, so
      // `2 * t` and `t * 2` keep t's dtype. `%` is remainder (Python's sign
      // rule, as PyTorch's `%`).
      bind("__add", [](Operand a, Operand b) { return at::add(*a.value, *b.value); }),
      bind("__sub", [](Operand a, Operand b) { return at::sub(*a.value, *b.value); }),
      bind("__mul", [](Operand a, Operand b) { return at::mul(*a.value, *b.value); }),
      bind("__div", [](Operand a, Operand b) { return at::div(*a.value, *b.value); }),
      bind("__pow", [](Operand a, Operand b) { return at::pow(*a.value, *b.value); }),
      bind("__mod", [](Operand a, Operand b) { return at::remainder(*a.value, *b.value); }),
      bind("__unm", [](T a) { return at::neg(a); }),

      bind("add", [](T a, Operand b, c10::optional<double> alpha) {
        return at::add(a, *b.value, alpha_of(alpha));
      }),
      bind("sub", [](T a, Operand b, c10::optional<double> alpha) {
        return at::sub(a, *b.value, alpha_of(alpha));
      }),
      bind("mul", [](T a, Operand b) { return at::mul(a, *b.value); }),
      bind("div", [](lua_State* L, T a, Operand b, Options o) {
        return at::div(a, *b.value, rounding_mode(L, o));
      }),
      bind("pow", [](T a, Operand b) { return at::pow(a, *b.value); }),
      bind("remainder", [](T a, Operand b) { return at::remainder(a, *b.value); }),
      bind("fmod", [](T a, Operand b) { return at::fmod(a, *b.value); }),
      bind("floor_divide", [](T a, Operand b) { return at::div(a, *b.value, "floor"); }),
      bind("atan2", [](T a, T b) { return at::atan2(a, b); }),
      bind("maximum", [](T a, Operand b) { return at::maximum(a, *b.value); }),
      bind("minimum", [](T a, Operand b) { return at::minimum(a, *b.value); }),
      bind("lerp", [](T a, T end, Operand weight) {
        return is_number(weight) ? at::lerp(a, end, weight.value->item()) : at::lerp(a, end, *weight.value);
      }),
      bind("addcmul", [](T a, T t1, T t2, c10::optional<double> value) {
        return at::addcmul(a, t1, t2, alpha_of(value));
      }),
      bind("addcdiv", [](T a, T t1, T t2, c10::optional<double> value) {
        return at::addcdiv(a, t1, t2, alpha_of(value));
      }),
      bind("clamp", clamp),
      bind("clip", clamp),
      bind("nan_to_num", [](T a, c10::optional<double> nan, c10::optional<double> posinf,
                            c10::optional<double> neginf) {
        return at::nan_to_num(a, nan.value_or(0.0), posinf, neginf);
      }),

      bind("add_", [](Tensor a, Operand b, c10::optional<double> alpha) {
        a.add_(*b.value, alpha_of(alpha));
        return Self{};
      }),
      bind("sub_", [](Tensor a, Operand b, c10::optional<double> alpha) {
        a.sub_(*b.value, alpha_of(alpha));
        return Self{};
      }),
      bind("mul_", [](Tensor a, Operand b) {
        a.mul_(*b.value);
        return Self{};
      }),
      bind("div_", [](lua_State* L, Tensor a, Operand b, Options o) {
        a.div_(*b.value, rounding_mode(L, o));
        return Self{};
      }),
      bind("pow_", [](Tensor a, Operand b) {
        a.pow_(*b.value);
        return Self{};
      }),
      bind("lerp_", [](Tensor a, T end, Operand weight) {
        if (is_number(weight)) {
          a.lerp_(end, weight.value->item());
        } else {
          a.lerp_(end, *weight.value);
        }
        return Self{};
      }),
      bind("addcmul_", [](Tensor a, T t1, T t2, c10::optional<double> value) {
        a.addcmul_(t1, t2, alpha_of(value));
        return Self{};
      }),
      bind("addcdiv_", [](Tensor a, T t1, T t2, c10::optional<double> value) {
        a.addcdiv_(t1, t2, alpha_of(value));
        return Self{};
      }),
      bind("clamp_", [](Tensor a, c10::optional<Operand> lo, c10::optional<Operand> hi) {
        clamp_in_place(a, lo, hi);
        return Self{};
      }),

      // Pointwise math.
      bind("neg", [](T a) { return at::neg(a); }),
      bind("abs", [](T a) { return at::abs(a); }),
      bind("sign", [](T a) { return at::sign(a); }),
      bind("exp", [](T a) { return at::exp(a); }),
      bind("exp2", [](T a) { return at::exp2(a); }),
      bind("expm1", [](T a) { return at::expm1(a); }),
      bind("log", [](T a) { return at::log(a); }),
      bind("log2", [](T a) { return at::log2(a); }),
      bind("log10", [](T a) { return at::log10(a); }),
      bind("log1p", [](T a) { return at::log1p(a); }),
      bind("sqrt", [](T a) { return at::sqrt(a); }),
      bind("rsqrt", [](T a) { return at::rsqrt(a); }),
      bind("square", [](T a) { return at::square(a); }),
      bind("reciprocal", [](T a) { return at::reciprocal(a); }),
      bind("sin", [](T a) { return at::sin(a); }),
      bind("cos", [](T a) { return at::cos(a); }),
      bind("tan", [](T a) { return at::tan(a); }),
      bind("asin", [](T a) { return at::asin(a); }),
      bind("acos", [](T a) { return at::acos(a); }),
      bind("atan", [](T a) { return at::atan(a); }),
      bind("sinh", [](T a) { return at::sinh(a); }),
      bind("cosh", [](T a) { return at::cosh(a); }),
      bind("tanh", [](T a) { return at::tanh(a); }),
      bind("sigmoid", [](T a) { return at::sigmoid(a); }),
      bind("relu", [](T a) { return at::relu(a); }),
      bind("erf", [](T a) { return at::erf(a); }),
      bind("erfc", [](T a) { return at::erfc(a); }),
      bind("erfinv", [](T a) { return at::erfinv(a); }),
      bind("floor", [](T a) { return at::floor(a); }),
      bind("ceil", [](T a) { return at::ceil(a); }),
      // round(decimals): half to even, as PyTorch.
      bind("round", [](T a, c10::optional<int64_t> decimals) {
        return decimals ? at::round(a, *decimals) : at::round(a);
      }),
      bind("trunc", [](T a) { return at::trunc(a); }),
      bind("frac", [](T a) { return at::frac(a); }),

      bind("neg_", [](Tensor a) { a.neg_(); return Self{}; }),
      bind("abs_", [](Tensor a) { a.abs_(); return Self{}; }),
      bind("exp_", [](Tensor a) { a.exp_(); return Self{}; }),
      bind("log_", [](Tensor a) { a.log_(); return Self{}; }),
      bind("sqrt_", [](Tensor a) { a.sqrt_(); return Self{}; }),
      bind("rsqrt_", [](Tensor a) { a.rsqrt_(); return Self{}; }),
      bind("reciprocal_", [](Tensor a) { a.reciprocal_(); return Self{}; }),
      bind("tanh_", [](Tensor a) { a.tanh_(); return Self{}; }),
      bind("sigmoid_", [](Tensor a) { a.sigmoid_(); return Self{}; }),
      bind("relu_", [](Tensor a) { a.relu_(); return Self{}; }),
      bind("floor_", [](Tensor a) { a.floor_(); return Self{}; }),
      bind("ceil_", [](Tensor a) { a.ceil_(); return Self{}; }),
      bind("round_", [](Tensor a) { a.round_(); return Self{}; }),
      bind("trunc_", [](Tensor a) { a.trunc_(); return Self{}; }),
  };
}

}  // namespace accel::lua
