// accel.nn.functional: layers and losses as functions. Class targets of
// cross_entropy and nll_loss are 1-based, like every index in the Lua API.
#include "bindings/op_tables.h"

namespace accel::lua {
namespace {

using T = const at::Tensor&;
using at::Tensor;

int64_t reduction_of(lua_State* L, const Options& o) {
  std::string r = option_string(L, o, "reduction", "mean");
  if (r == "mean") return at::Reduction::Mean;
  if (r == "sum") return at::Reduction::Sum;
  if (r == "none") return at::Reduction::None;
  throw ArgError("option 'reduction' must be 'mean', 'sum' or 'none', got '" + r + "'");
}

// 1-based class targets (and ignore_index) as LibTorch's 0-based ones.
std::pair<Tensor, int64_t> zero_based_targets(lua_State* L, T target, const Options& o) {
  bool has_ignore = option_present(L, o, "ignore_index");
  int64_t ignore = has_ignore ? static_cast<int64_t>(option_number(L, o, "ignore_index", 0)) : 0;
  if (target.numel() > 0) {
    Tensor counted = has_ignore ? target.masked_select(target.ne(ignore)) : target;
    if (counted.numel() > 0) {
      int64_t smallest = counted.min().item<int64_t>();
      TORCH_CHECK(smallest >= 1, "class targets are 1-based, but one is ", smallest);
    }
  }
  return {target - 1, has_ignore ? ignore - 1 : -100};
}

}  // namespace

std::vector<Binding> nn_functional_bindings() {
  return {
      bind("linear", [](T x, T weight, c10::optional<Tensor> bias) {
        return at::linear(x, weight, bias);
      }),
      bind("relu", [](T x) { return at::relu(x); }),
      bind("gelu", [](T x) { return at::gelu(x); }),
      bind("silu", [](T x) { return at::silu(x); }),
      bind("tanh", [](T x) { return at::tanh(x); }),
      bind("sigmoid", [](T x) { return at::sigmoid(x); }),
      bind("softmax", [](T x, Dim dim) { return at::softmax(x, dim.value); }),
      bind("log_softmax", [](T x, Dim dim) { return at::log_softmax(x, dim.value); }),
      bind("dropout", [](T x, double p, c10::optional<bool> training) {
        return at::dropout(x, p, training.value_or(true));
      }),
      // cross_entropy(logits, targets, {reduction, label_smoothing, ignore_index})
      bind("cross_entropy", [](lua_State* L, T input, T target, Options o) {
        int64_t reduction = reduction_of(L, o);
        double smoothing = option_number(L, o, "label_smoothing", 0.0);
        if (target.is_floating_point()) {  // class probabilities, not indices
          return at::cross_entropy_loss(input, target, {}, reduction, -100, smoothing);
        }
        auto [zero_based, ignore] = zero_based_targets(L, target, o);
        return at::cross_entropy_loss(input, zero_based, {}, reduction, ignore, smoothing);
      }),
      bind("nll_loss", [](lua_State* L, T input, T target, Options o) {
        int64_t reduction = reduction_of(L, o);
        auto [zero_based, ignore] = zero_based_targets(L, target, o);
        return at::nll_loss_nd(input, zero_based, {}, reduction, ignore);
      }),
      bind("mse_loss", [](lua_State* L, T input, T target, Options o) {
        return at::mse_loss(input, target, reduction_of(L, o));
      }),
      bind("l1_loss", [](lua_State* L, T input, T target, Options o) {
        return at::l1_loss(input, target, reduction_of(L, o));
      }),
  };
}

}  // namespace accel::lua
