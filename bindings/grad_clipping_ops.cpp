// accel.clip_grad_norm and accel.clip_grad_value (the Accelerator calls them
// after unscaling fp16 gradients).
#include "bindings/op_tables.h"
#include "engine/grad_clipping.h"

namespace accel::lua {

std::vector<Binding> grad_clipping_bindings() {
  return {
      bind("clip_grad_norm", [](TensorList params, double max_norm, c10::optional<double> norm_type) {
        return clip_grad_norm(params.value, max_norm, norm_type.value_or(2.0));
      }),
      bind("clip_grad_value", [](TensorList params, double value) {
        clip_grad_value(params.value, value);
      }),
  };
}

}  // namespace accel::lua
