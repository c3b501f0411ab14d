// accel.nn.functional, ids into vectors: embedding and one_hot. Ids are
// 1-based, like every index in the Lua API; embedding also takes the
// 0-based token ids of tokenizers and pretrained checkpoints (index_base = 0).
#include "bindings/op_tables.h"

namespace accel::lua {
namespace {

using T = const at::Tensor&;
using at::Tensor;

// Ids counted from `base` (1, as everywhere in the Lua API; 0 for the token
// ids of tokenizers and pretrained checkpoints) as LibTorch's 0-based ones;
// the first id out of range is named.
Tensor zero_based_ids(T ids, int64_t n, int64_t base = 1) {
  const char* contents = base == 1 ? "1-based ids" : "0-based ids";
  require_integer_tensor(ids, "ids", contents);
  if (const auto range = index_range(ids)) {
    const auto [smallest, largest] = *range;
    TORCH_CHECK(smallest >= base && largest <= n - 1 + base, "id ", smallest < base ? smallest : largest,
                " is out of range (", contents, ": ", base, " to ", n - 1 + base, ")");
  }
  return base == 0 ? ids.to(at::kLong) : ids.to(at::kLong) - base;
}

// The `index_base` option: 1 (the default) or 0.
int64_t index_base(lua_State* L, const Options& o) {
  const int64_t base = option_integer(L, o, "index_base", 1);
  TORCH_CHECK(base == 0 || base == 1, "option 'index_base' must be 0 or 1, got ", base);
  return base;
}

// embedding(ids, weight, {padding_idx, max_norm, norm_type, scale_grad_by_freq,
// index_base}). Ids and padding_idx are 1-based, or 0-based with index_base = 0
// (token ids as tokenizers give them); padding_idx may count from the end when
// negative; its row gets no gradient.
Tensor embedding(lua_State* L, T ids, Tensor weight, Options o) {
  check_option_names(L, o, {"padding_idx", "max_norm", "norm_type", "scale_grad_by_freq", "index_base"});
  TORCH_CHECK(weight.dim() == 2, "expected a 2-D weight (num_embeddings, dim), got shape ",
              shape_text(weight.sizes()));
  int64_t n = weight.size(0);
  const int64_t base = index_base(L, o);
  Tensor zero_based = zero_based_ids(ids, n, base);
  int64_t padding = -1;
  if (option_present(L, o, "padding_idx")) {
    int64_t p = option_integer(L, o, "padding_idx", 0);
    if (base == 1) {
      TORCH_CHECK(p != 0 && p >= -n && p <= n, "padding_idx ", p,
                  " is out of range (1-based: 1 to ", n, ", or -1 to -", n, " from the end)");
      padding = p > 0 ? p - 1 : n + p;
    } else {
      TORCH_CHECK(p >= -n && p < n, "padding_idx ", p, " is out of range (0-based: 0 to ", n - 1,
                  ", or -1 to -", n, " from the end)");
      padding = p >= 0 ? p : n + p;
    }
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
