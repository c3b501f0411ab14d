// Comparisons and logic: elementwise comparisons give bool tensors
// (`t:gt(0)`), `where` selects between two operands, and the whole-tensor
// tests (`equal`, `allclose`) give Lua booleans.
#include "bindings/op_tables.h"

namespace accel::lua {
namespace {

using T = const at::Tensor&;
using at::Tensor;

struct Tolerances {
  double rtol, atol;
  bool equal_nan;
};

// `{rtol = 1e-5, atol = 1e-8, equal_nan = false}`, PyTorch's defaults.
Tolerances tolerances(lua_State* L, const Options& o) {
  check_option_names(L, o, {"rtol", "atol", "equal_nan"});
  return {option_number(L, o, "rtol", 1e-5), option_number(L, o, "atol", 1e-8),
          option_boolean(L, o, "equal_nan", false)};
}

}  // namespace

std::vector<Binding> tensor_compare_bindings() {
  return {
      bind("eq", [](T a, Operand b) { return at::eq(a, *b.value); }),
      bind("ne", [](T a, Operand b) { return at::ne(a, *b.value); }),
      bind("lt", [](T a, Operand b) { return at::lt(a, *b.value); }),
      bind("le", [](T a, Operand b) { return at::le(a, *b.value); }),
      bind("gt", [](T a, Operand b) { return at::gt(a, *b.value); }),
      bind("ge", [](T a, Operand b) { return at::ge(a, *b.value); }),

      bind("logical_and", [](T a, Operand b) { return at::logical_and(a, *b.value); }),
      bind("logical_or", [](T a, Operand b) { return at::logical_or(a, *b.value); }),
      bind("logical_xor", [](T a, Operand b) { return at::logical_xor(a, *b.value); }),
      bind("logical_not", [](T a) { return at::logical_not(a); }),

      // where(condition, x, y): x where condition holds, else y; x and y may
      // be numbers. As a method, `mask:where(x, y)`.
      bind("where", [](T condition, Operand x, Operand y) {
        TORCH_CHECK(condition.scalar_type() == at::kBool,
                    "the condition must be a bool tensor (from a comparison), got ",
                    dtype_text(condition.scalar_type()));
        return at::where(condition, *x.value, *y.value);
      }),

      bind("isnan", [](T a) { return at::isnan(a); }),
      bind("isinf", [](T a) { return at::isinf(a); }),
      bind("isfinite", [](T a) { return at::isfinite(a); }),
      bind("isclose", [](lua_State* L, T a, T b, Options o) {
        Tolerances tol = tolerances(L, o);
        return at::isclose(a, b, tol.rtol, tol.atol, tol.equal_nan);
      }),
      bind("allclose", [](lua_State* L, T a, T b, Options o) {
        Tolerances tol = tolerances(L, o);
        return at::allclose(a, b, tol.rtol, tol.atol, tol.equal_nan);
      }),
      // Same shape and the same values.
      bind("equal", [](T a, T b) { return at::equal(a, b); }),
  };
}

}  // namespace accel::lua
