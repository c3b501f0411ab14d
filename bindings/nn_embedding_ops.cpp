// accel.nn.functional, ids into vectors: embedding and one_hot. Ids are
// 1-based, like every index in the Lua API.
#include "bindings/op_tables.h"

namespace accel::lua {
namespace {

using T = const at::Tensor&;
using at::Tensor;

// 1-based ids as LibTorch's 0-based ones; the first id out of 1..n is named.
Tensor zero_based_ids(T ids, int64_t n) {
  require_integer_tensor(ids, "ids", "1-based ids");
  if (const auto range = index_range(ids)) {
    const auto [smallest, largest] = *range;
    TORCH_CHECK(smallest >= 1, "id ", smallest, " is out of range (ids are 1-based: 1 to ", n, ")");
    TORCH_CHECK(largest <= n, "id ", largest, " is out of range (ids are 1-based: 1 to ", n, ")");
  }
  return ids.to(at::kLong) - 1;
}

// embedding(ids, weight, {padding_idx, max_norm, norm_type, scale_grad_by_freq}).
// padding_idx is 1-based (negative counts from the end); its row gets no gradient.
Tensor embedding(lua_State* L, T ids, Tensor weight, Options o) {
  check_option_names(L, o, {"padding_idx", "max_norm", "norm_type", "scale_grad_by_freq"});
  TORCH_CHECK(weight.dim() == 2, "expected a 2-D weight (num_embeddings, dim), got shape ",
              shape_text(weight.sizes()));
  int64_t n = weight.size(0);
  Tensor zero_based = zero_based_ids(ids, n);
  int64_t padding = -1;
  if (option_present(L, o, "padding_idx")) {
    int64_t p = option_integer(L, o, "padding_idx", 0);
    TORCH_CHECK(p != 0 && p >= -n && p <= n, "padding_idx ", p,
                " is out of range (1-based: 1 to ", n, ", or -1 to -", n, " from the end)");
    padding = p > 0 ? p - 1 : n + p;
  }
  if (option_present(L, o, "max_norm")) {
    // As PyTorch: rows looked up are renormalised in place, outside autograd.
    at::NoGradGuard no_grad;
    at::embedding_renorm_(weight, zero_based.reshape(-1), option_number(L, o, "max_norm", 0),
                          option_number(L, o, "norm_type", 2.0));
  }
  return at::embedding(weight, zero_based, padding, option_boolean(L, o, "scale_grad_by_freq", false));
}

// one_hot(ids, num_classes): classes 1..C set position 1..C; C defaults to the largest id.
Tensor one_hot(T ids, c10::optional<int64_t> num_classes) {
  int64_t n = num_classes.value_or(ids.numel() > 0 ? ids.max().item<int64_t>() : 0);
  TORCH_CHECK(n >= 1, "num_classes must be at least 1, got ", n);
  return at::one_hot(zero_based_ids(ids, n), n);
}

}  // namespace

std::vector<Binding> nn_embedding_bindings() {
  return {
      bind("embedding", embedding),
      bind("one_hot", one_hot),
  };
}

}  // namespace accel::lua
