// accel.nn.functional, pooling: max (with 1-based indices on request),
// average and adaptive average, in 1 and 2 spatial dims.
#include "bindings/op_tables.h"

namespace accel::lua {
namespace {

using T = const at::Tensor&;
using at::Tensor;

template <int Spatial>
Pushed max_pool(lua_State* L, T x, Sizes kernel, Options o) {
  check_option_names(L, o, {"stride", "padding", "dilation", "ceil_mode", "return_indices"});
  // PyTorch's default stride is the kernel size.
  std::vector<int64_t> stride = option_integers(L, o, "stride", kernel.value);
  std::vector<int64_t> padding = option_integers(L, o, "padding", {0});
  std::vector<int64_t> dilation = option_integers(L, o, "dilation", {1});
  bool ceil_mode = option_boolean(L, o, "ceil_mode", false);
  if (!option_boolean(L, o, "return_indices", false)) {
    return Pushed{push(L, Spatial == 1 ? at::max_pool1d(x, kernel.value, stride, padding, dilation, ceil_mode)
                                       : at::max_pool2d(x, kernel.value, stride, padding, dilation, ceil_mode))};
  }
  auto [values, indices] =
      Spatial == 1 ? at::max_pool1d_with_indices(x, kernel.value, stride, padding, dilation, ceil_mode)
                   : at::max_pool2d_with_indices(x, kernel.value, stride, padding, dilation, ceil_mode);
  // Positions in each flattened input plane, 1-based like every index.
  return Pushed{push(L, std::make_tuple(values, indices.add(1)))};
}

template <int Spatial>
Tensor avg_pool(lua_State* L, T x, Sizes kernel, Options o) {
  if (Spatial == 1) {
    check_option_names(L, o, {"stride", "padding", "ceil_mode", "count_include_pad"});
  } else {
    check_option_names(L, o, {"stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"});
  }
  std::vector<int64_t> stride = option_integers(L, o, "stride", kernel.value);
  std::vector<int64_t> padding = option_integers(L, o, "padding", {0});
  bool ceil_mode = option_boolean(L, o, "ceil_mode", false);
  bool count_include_pad = option_boolean(L, o, "count_include_pad", true);
  if (Spatial == 1) {
    return at::avg_pool1d(x, kernel.value, stride, padding, ceil_mode, count_include_pad);
  }
  c10::optional<int64_t> divisor;
  if (option_present(L, o, "divisor_override")) divisor = option_integer(L, o, "divisor_override", 1);
  return at::avg_pool2d(x, kernel.value, stride, padding, ceil_mode, count_include_pad, divisor);
}

}  // namespace

std::vector<Binding> nn_pooling_bindings() {
  return {
      bind("max_pool1d", max_pool<1>),
      bind("max_pool2d", max_pool<2>),
      bind("avg_pool1d", avg_pool<1>),
      bind("avg_pool2d", avg_pool<2>),
      bind("adaptive_avg_pool1d", [](T x, Sizes size) { return at::adaptive_avg_pool1d(x, size.value); }),
      bind("adaptive_avg_pool2d", [](T x, Sizes size) {
        // One number is the size of both dims, as in PyTorch.
        if (size.value.size() == 1) size.value.push_back(size.value[0]);
        return at::adaptive_avg_pool2d(x, size.value);
      }),
  };
}

}  // namespace accel::lua
