// accel.nn.functional, normalisation: batch, layer and group norm, and
// normalize. Options (eps, momentum, training) are named as in PyTorch.
#include "bindings/op_tables.h"

namespace accel::lua {
namespace {

using T = const at::Tensor&;
using at::Tensor;
using OptTensor = c10::optional<Tensor>;

// batch_norm(x, running_mean, running_var, weight, bias, {training, momentum, eps}):
// in training mode the batch statistics normalise and, when running stats are
// given, update them in place: new = (1 - momentum) * old + momentum * batch
// (the unbiased variance for running_var), as PyTorch.
Tensor batch_norm(lua_State* L, T x, OptTensor running_mean, OptTensor running_var,
                  OptTensor weight, OptTensor bias, Options o) {
  check_option_names(L, o, {"training", "momentum", "eps"});
  bool training = option_boolean(L, o, "training", false);
  TORCH_CHECK(x.dim() >= 2, "expected an input of at least 2 dims (N, C, ...), got shape ",
              shape_text(x.sizes()));
  TORCH_CHECK(training || (running_mean && running_var),
              "running_mean and running_var are needed when not training");
  if (training) {
    int64_t per_channel = x.numel() / x.size(1);
    TORCH_CHECK(per_channel > 1,
                "expected more than 1 value per channel when training, got input shape ",
                shape_text(x.sizes()));
  }
  return at::batch_norm(x, weight, bias, running_mean, running_var, training,
                        option_number(L, o, "momentum", 0.1), option_number(L, o, "eps", 1e-5),
                        false);
}

Tensor layer_norm(lua_State* L, T x, Sizes shape, OptTensor weight, OptTensor bias, Options o) {
  check_option_names(L, o, {"eps"});
  return at::layer_norm(x, shape.value, weight, bias, option_number(L, o, "eps", 1e-5));
}

Tensor group_norm(lua_State* L, T x, int64_t num_groups, OptTensor weight, OptTensor bias,
                  Options o) {
  check_option_names(L, o, {"eps"});
  TORCH_CHECK(x.dim() >= 2, "expected an input of at least 2 dims (N, C, ...), got shape ",
              shape_text(x.sizes()));
  TORCH_CHECK(num_groups > 0 && x.size(1) % num_groups == 0, x.size(1),
              " channels cannot be split into ", num_groups, " groups");
  return at::group_norm(x, num_groups, weight, bias, option_number(L, o, "eps", 1e-5));
}

// normalize(x, {p = 2, dim = 2, eps = 1e-12}): x / max(||x||_p over dim, eps).
Tensor normalize(lua_State* L, T x, Options o) {
  check_option_names(L, o, {"p", "dim", "eps"});
  double p = option_number(L, o, "p", 2.0);
  int64_t dim = to_zero_based_dim(option_integer(L, o, "dim", 2), "dim");
  double eps = option_number(L, o, "eps", 1e-12);
  Tensor norm = at::norm(x, at::Scalar(p), {dim}, true).clamp_min(eps);
  return x / norm.expand_as(x);
}

}  // namespace

std::vector<Binding> nn_normalization_bindings() {
  return {
      bind("batch_norm", batch_norm),
      bind("layer_norm", layer_norm),
      bind("group_norm", group_norm),
      bind("normalize", normalize),
  };
}

}  // namespace accel::lua
