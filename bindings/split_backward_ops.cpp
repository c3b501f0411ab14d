// accel.core.autograd.input_backward: the zero-bubble schedules' split
// backward (engine/parallel/split_backward.h) as a Lua value, for the
// pipeline's stage runtime (lua/accel/parallel/pipeline/stage_runtime.lua).
#include <memory>

#include "bindings/lua_in_backward.h"
#include "bindings/op_tables.h"
#include "bindings/split_backward_ops.h"
#include "engine/parallel/split_backward.h"

namespace accel::lua {
namespace {

using SplitPtr = std::unique_ptr<SplitBackward>;

std::vector<Binding> split_methods();

const HandleType kSplit{"accel.SplitBackward", "SplitBackward:", split_methods};

std::vector<Binding> split_methods() {
  return {
      // W: the parameters' gradients, into their .grad.
      bind("weight_backward", [](lua_State* L, Receiver) {
        LentToBackward lent(L);
        check_handle<SplitPtr>(L, 1, kSplit)->weight_backward();
      }),
      bind("weight_done", [](lua_State* L, Receiver) { return check_handle<SplitPtr>(L, 1, kSplit)->weight_done(); }),
      bind("intermediates", [](lua_State* L, Receiver) {
        return static_cast<int64_t>(check_handle<SplitPtr>(L, 1, kSplit)->intermediates());
      }),
  };
}

}  // namespace

std::vector<Binding> split_backward_bindings() {
  return {
      // input_backward(output, grad or nil, input, params): B, input.grad
      // accumulated; returns the SplitBackward whose weight_backward is W.
      bind("input_backward", [](lua_State* L, const at::Tensor& output, c10::optional<at::Tensor> grad,
                                 const at::Tensor& input, TensorList params) {
        LentToBackward lent(L);
        push_handle(L, kSplit, SplitBackward::input_backward(output, grad.value_or(at::Tensor()), input, params.value));
        return Pushed{1};
      }),
  };
}

}  // namespace accel::lua
