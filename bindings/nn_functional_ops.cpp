// accel.nn.functional: activations, linear maps, dropout and losses as functions. Keyword
// arguments of PyTorch come in an options table named as in PyTorch
// (`cross_entropy(x, y, {label_smoothing = 0.1})`); an unknown option is an
// error naming it. Class targets (and ignore_index) are 1-based, like every
// index in the Lua API.
#include "bindings/op_tables.h"
#include "engine/nn/float8_linear.h"
#include "engine/nn/linear.h"

namespace accel::lua {
namespace {

using T = const at::Tensor&;
using at::Tensor;

// 'mean', 'sum' or 'none'; kl_div also takes 'batchmean', returned as -1.
constexpr int64_t kBatchMean = -1;
int64_t reduction_of(lua_State* L, const Options& o, bool batchmean_allowed = false) {
  std::string r = option_string(L, o, "reduction", "mean");
  if (r == "mean") return at::Reduction::Mean;
  if (r == "sum") return at::Reduction::Sum;
  if (r == "none") return at::Reduction::None;
  if (r == "batchmean" && batchmean_allowed) return kBatchMean;
  throw ArgError(std::string("option 'reduction' must be 'mean', 'sum', 'none'") +
                 (batchmean_allowed ? " or 'batchmean'" : "") + ", got '" + r + "'");
}

// 1-based class targets (and ignore_index) as LibTorch's 0-based ones,
// checked against the number of classes (dim 2 of the input, or dim 1 of
// an unbatched one) so no 0-based "out of bounds" message reaches the user.
// With {index_base = 0} they are 0-based already (token ids as labels).
std::pair<Tensor, int64_t> zero_based_targets(lua_State* L, T input, T target, const Options& o) {
  const int64_t base = option_integer(L, o, "index_base", 1);
  TORCH_CHECK(base == 0 || base == 1, "option 'index_base' must be 0 or 1, got ", base);
  const char* contents = base == 1 ? "1-based classes" : "0-based classes";
  require_integer_tensor(target, "class targets", contents);
  bool has_ignore = option_present(L, o, "ignore_index");
  int64_t ignore = has_ignore ? static_cast<int64_t>(option_number(L, o, "ignore_index", 0)) : 0;
  int64_t classes = input.dim() >= 2 ? input.size(1) : (input.dim() == 1 ? input.size(0) : 0);
  // Ignored targets count as the first class, so that the range is read
  // without selecting (whose size the host would have to read first).
  Tensor counted = has_ignore ? at::where(target.ne(ignore), target, at::full_like(target, base)) : target;
  if (const auto range = index_range(counted)) {
    const auto [smallest, largest] = *range;
    TORCH_CHECK(smallest >= base, "class targets are ", base, "-based, but one is ", smallest);
    TORCH_CHECK(largest <= classes - 1 + base, "class target ", largest, " is out of range for ", classes,
                " classes (targets are ", base, "-based: ", base, " to ", classes - 1 + base, ")");
  }
  if (base == 0) return {target.to(at::kLong), has_ignore ? ignore : -100};
  return {target.to(at::kLong) - 1, has_ignore ? ignore - 1 : -100};
}

Tensor cross_entropy(lua_State* L, T input, T target, Options o) {
  check_option_names(L, o, {"reduction", "label_smoothing", "ignore_index", "weight", "index_base"});
  int64_t reduction = reduction_of(L, o);
  double smoothing = option_number(L, o, "label_smoothing", 0.0);
  TORCH_CHECK(smoothing >= 0.0 && smoothing <= 1.0,
              "label_smoothing must be between 0 and 1, got ", smoothing);
  auto weight = option_tensor(L, o, "weight");
  // A float target of the input's shape holds class probabilities; of any
  // other shape it was meant as class ids.
  if (target.is_floating_point() && target.sizes() == input.sizes()) {
    return at::cross_entropy_loss(input, target, weight, reduction, -100, smoothing);
  }
  auto [zero_based, ignore] = zero_based_targets(L, input, target, o);
  return at::cross_entropy_loss(input, zero_based, weight, reduction, ignore, smoothing);
}

Tensor nll_loss(lua_State* L, T input, T target, Options o) {
  check_option_names(L, o, {"reduction", "ignore_index", "weight", "index_base"});
  int64_t reduction = reduction_of(L, o);
  auto [zero_based, ignore] = zero_based_targets(L, input, target, o);
  return at::nll_loss_nd(input, zero_based, option_tensor(L, o, "weight"), reduction, ignore);
}

// kl_div(input, target): input holds log-probabilities; target holds
// probabilities, or log-probabilities with {log_target = true}.
// 'batchmean' divides the sum by the batch size, the mathematically right
// mean; 'mean' divides by the element count, as PyTorch's default does.
Tensor kl_div(lua_State* L, T input, T target, Options o) {
  check_option_names(L, o, {"reduction", "log_target"});
  int64_t reduction = reduction_of(L, o, true);
  bool log_target = false;
  if (option_present(L, o, "log_target")) {
    lua_getfield(L, o.index, "log_target");
    log_target = lua_toboolean(L, -1) != 0;
    lua_pop(L, 1);
  }
  if (reduction != kBatchMean) return at::kl_div(input, target, reduction, log_target);
  Tensor sum = at::kl_div(input, target, at::Reduction::Sum, log_target);
  return input.dim() == 0 ? sum : sum / input.size(0);
}

Tensor binary_cross_entropy_with_logits(lua_State* L, T input, T target, Options o) {
  check_option_names(L, o, {"reduction", "weight", "pos_weight"});
  return at::binary_cross_entropy_with_logits(input, target, option_tensor(L, o, "weight"),
                                              option_tensor(L, o, "pos_weight"),
                                              reduction_of(L, o));
}

// {dtype = ...}: the dtype softmax computes and returns in.
c10::optional<at::ScalarType> softmax_dtype(lua_State* L, const Options& o) {
  check_option_names(L, o, {"dtype"});
  if (!option_present(L, o, "dtype")) return c10::nullopt;
  return parse_dtype(option_string(L, o, "dtype", ""));
}

}  // namespace

std::vector<Binding> nn_functional_bindings() {
  return {
      // engine/nn/linear.h: CPU float32 products through oneDNN.
      bind("linear", [](T x, T weight, c10::optional<Tensor> bias) { return nn::linear(x, weight, bias); }),
      // float8_linear(x, weight[, bias]): mixed precision "fp8"'s linear
      // (engine/nn/float8_linear.h), bfloat16 out.
      bind("float8_linear", [](T x, T weight, c10::optional<Tensor> bias) {
        return nn::float8_linear(x, weight, bias);
      }),
      bind("bilinear", [](T x1, T x2, T weight, c10::optional<Tensor> bias) {
        return at::bilinear(x1, x2, weight, bias);
      }),
      bind("relu", [](T x) { return at::relu(x); }),
      // gelu(x [, {approximate = 'tanh'}]): the exact (erf) form by default.
      bind("gelu", [](lua_State* L, T x, Options o) {
        check_option_names(L, o, {"approximate"});
        std::string approximate = option_string(L, o, "approximate", "none");
        TORCH_CHECK(approximate == "none" || approximate == "tanh",
                    "option 'approximate' must be 'none' or 'tanh', got '", approximate, "'");
        return at::gelu(x, approximate);
      }),
      bind("silu", [](T x) { return at::silu(x); }),
      bind("tanh", [](T x) { return at::tanh(x); }),
      bind("sigmoid", [](T x) { return at::sigmoid(x); }),
      bind("leaky_relu", [](T x, c10::optional<double> slope) {
        return at::leaky_relu(x, slope.value_or(0.01));
      }),
      bind("elu", [](T x, c10::optional<double> alpha) { return at::elu(x, alpha.value_or(1.0)); }),
      bind("celu", [](T x, c10::optional<double> alpha) { return at::celu(x, alpha.value_or(1.0)); }),
      bind("selu", [](T x) { return at::selu(x); }),
      bind("softplus", [](T x, c10::optional<double> beta, c10::optional<double> threshold) {
        return at::softplus(x, beta.value_or(1.0), threshold.value_or(20.0));
      }),
      bind("hardtanh", [](T x, c10::optional<double> lo, c10::optional<double> hi) {
        return at::hardtanh(x, lo.value_or(-1.0), hi.value_or(1.0));
      }),
      bind("relu6", [](T x) { return at::hardtanh(x, 0.0, 6.0); }),
      bind("mish", [](T x) { return at::mish(x); }),
      bind("hardswish", [](T x) { return at::hardswish(x); }),
      bind("hardsigmoid", [](T x) { return at::hardsigmoid(x); }),
      bind("logsigmoid", [](T x) { return at::log_sigmoid(x); }),
      bind("softsign", [](T x) { return x / (x.abs() + 1); }),
      bind("prelu", [](T x, T weight) { return at::prelu(x, weight); }),
      bind("softmax", [](lua_State* L, T x, Dim dim, Options o) {
        return at::softmax(x, dim.value, softmax_dtype(L, o));
      }),
      bind("log_softmax", [](lua_State* L, T x, Dim dim, Options o) {
        return at::log_softmax(x, dim.value, softmax_dtype(L, o));
      }),
      // dropout(x [, p = 0.5] [, training = true]).
      bind("dropout", [](T x, c10::optional<double> p, c10::optional<bool> training) {
        return at::dropout(x, p.value_or(0.5), training.value_or(true));
      }),
      // dropout2d(x, p [, training = true]): whole channels at a time.
      bind("dropout2d", [](T x, double p, c10::optional<bool> training) {
        return at::feature_dropout(x, p, training.value_or(true));
      }),

      // cross_entropy(logits, targets [, {reduction, label_smoothing,
      // ignore_index, weight}]); targets are 1-based classes, or class
      // probabilities when they are a float tensor.
      bind("cross_entropy", cross_entropy),
      bind("nll_loss", nll_loss),
      bind("mse_loss", [](lua_State* L, T input, T target, Options o) {
        check_option_names(L, o, {"reduction"});
        return at::mse_loss(input, target, reduction_of(L, o));
      }),
      bind("l1_loss", [](lua_State* L, T input, T target, Options o) {
        check_option_names(L, o, {"reduction"});
        return at::l1_loss(input, target, reduction_of(L, o));
      }),
      // smooth_l1_loss(input, target [, {beta = 1, reduction}]): quadratic
      // below beta, linear above.
      bind("smooth_l1_loss", [](lua_State* L, T input, T target, Options o) {
        check_option_names(L, o, {"reduction", "beta"});
        double beta = option_number(L, o, "beta", 1.0);
        TORCH_CHECK(beta >= 0.0, "option 'beta' must not be negative, got ", beta);
        return at::smooth_l1_loss(input, target, reduction_of(L, o), beta);
      }),
      bind("huber_loss", [](lua_State* L, T input, T target, Options o) {
        check_option_names(L, o, {"reduction", "delta"});
        return at::huber_loss(input, target, reduction_of(L, o), option_number(L, o, "delta", 1.0));
      }),
      bind("binary_cross_entropy", [](lua_State* L, T input, T target, Options o) {
        check_option_names(L, o, {"reduction", "weight"});
        return at::binary_cross_entropy(input, target, option_tensor(L, o, "weight"),
                                        reduction_of(L, o));
      }),
      bind("binary_cross_entropy_with_logits", binary_cross_entropy_with_logits),
      bind("kl_div", kl_div),
  };
}

}  // namespace accel::lua
