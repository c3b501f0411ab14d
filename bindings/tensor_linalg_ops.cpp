// Products: matmul (with PyTorch's broadcasting), the fixed-rank forms and
// einsum. `*` stays elementwise.
#include "bindings/op_tables.h"

namespace accel::lua {
namespace {

using T = const at::Tensor&;

}  // namespace

std::vector<Binding> tensor_linalg_bindings() {
  return {
      bind("matmul", [](T a, T b) { return at::matmul(a, b); }),
      bind("mm", [](T a, T b) { return at::mm(a, b); }),
      bind("bmm", [](T a, T b) { return at::bmm(a, b); }),
      bind("mv", [](T a, T v) { return at::mv(a, v); }),
      bind("dot", [](T a, T b) { return at::dot(a, b); }),
      bind("outer", [](T a, T b) { return at::outer(a, b); }),
      // einsum("ij,jk->ik", a, b), or with the operands in a table.
      bind("einsum", [](std::string equation, TensorArgs operands) {
        return at::einsum(equation, operands.value);
      }),
  };
}

}  // namespace accel::lua
