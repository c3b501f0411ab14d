// accel.nn.functional, convolution and the padding around it:
// `conv2d(x, w, b, {stride = 2, padding = 1})`, `pad(x, {1, 1}, {mode = "reflect"})`.
// Hyper-parameters come in an options table named as in PyTorch.
#include "bindings/op_tables.h"

namespace accel::lua {
namespace {

using T = const at::Tensor&;
using at::Tensor;
using OptTensor = c10::optional<Tensor>;

template <int Spatial>
Tensor conv(lua_State* L, T x, T weight, const OptTensor& bias, const Options& o) {
  check_option_names(L, o, {"stride", "padding", "dilation", "groups"});
  std::vector<int64_t> stride = option_integers(L, o, "stride", {1});
  std::vector<int64_t> dilation = option_integers(L, o, "dilation", {1});
  int64_t groups = option_integer(L, o, "groups", 1);
  TORCH_CHECK(x.dim() == Spatial + 1 || x.dim() == Spatial + 2, "expected a ",
              Spatial + 1, "-D (unbatched) or ", Spatial + 2, "-D (batched) input, got shape ",
              shape_text(x.sizes()));
  TORCH_CHECK(weight.dim() == Spatial + 2, "expected a ", Spatial + 2,
              "-D weight (out_channels, in_channels / groups, kernel...), got shape ",
              shape_text(weight.sizes()));
  if (option_present(L, o, "padding")) {
    lua_getfield(L, o.index, "padding");
    bool is_string = lua_type(L, -1) == LUA_TSTRING;
    std::string mode = is_string ? lua_tostring(L, -1) : "";
    lua_pop(L, 1);
    if (is_string) {
      TORCH_CHECK(mode == "same" || mode == "valid",
                  "option 'padding' must be a number, a table, 'same' or 'valid', got '", mode, "'");
      return Spatial == 1 ? at::conv1d(x, weight, bias, stride, mode, dilation, groups)
                          : at::conv2d(x, weight, bias, stride, mode, dilation, groups);
    }
  }
  std::vector<int64_t> padding = option_integers(L, o, "padding", {0});
  return Spatial == 1 ? at::conv1d(x, weight, bias, stride, padding, dilation, groups)
                      : at::conv2d(x, weight, bias, stride, padding, dilation, groups);
}

// pad(x, pads, {mode = "constant", value = 0}): pads in PyTorch's order, last dim first.
Tensor pad(lua_State* L, T x, Sizes pads, Options o) {
  check_option_names(L, o, {"mode", "value"});
  std::string mode = option_string(L, o, "mode", "constant");
  TORCH_CHECK(mode == "constant" || mode == "reflect" || mode == "replicate" || mode == "circular",
              "option 'mode' must be 'constant', 'reflect', 'replicate' or 'circular', got '", mode,
              "'");
  TORCH_CHECK(pads.value.size() % 2 == 0 && pads.value.size() / 2 <= static_cast<size_t>(x.dim()),
              "expected pairs (left, right) for at most ", x.dim(), " dims, got ",
              pads.value.size(), " numbers");
  c10::optional<double> value;
  if (mode == "constant") value = option_number(L, o, "value", 0.0);
  return at::pad(x, pads.value, mode, value);
}

}  // namespace

std::vector<Binding> nn_conv_bindings() {
  return {
      bind("conv1d", [](lua_State* L, T x, T w, OptTensor b, Options o) { return conv<1>(L, x, w, b, o); }),
      bind("conv2d", [](lua_State* L, T x, T w, OptTensor b, Options o) { return conv<2>(L, x, w, b, o); }),
      bind("pad", pad),
  };
}

}  // namespace accel::lua
