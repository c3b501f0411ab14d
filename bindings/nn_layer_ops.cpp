// accel.nn.functional, the layers: convolution, pooling, normalisation,
// embedding, attention, padding and the activations beyond the basic five.
// Hyper-parameters come in an options table named as in PyTorch
// (`conv2d(x, w, b, {stride = 2, padding = 1})`); an unknown option is an
// error naming it. Ids, classes, pooling indices and dims are 1-based.
#include <cmath>
#include <limits>

#include "bindings/op_tables.h"

namespace accel::lua {
namespace {

using T = const at::Tensor&;
using at::Tensor;
using OptTensor = c10::optional<Tensor>;

// ---- convolution ------------------------------------------------------------
template <int Spatial>
Tensor conv(lua_State* L, T x, T weight, const OptTensor& bias, const Options& o) {
  check_option_names(L, o, {"stride", "padding", "dilation", "groups"});
  std::vector<int64_t> stride = option_integers(L, o, "stride", {1});
  std::vector<int64_t> dilation = option_integers(L, o, "dilation", {1});
  int64_t groups = option_integer(L, o, "groups", 1);
  TORCH_CHECK(x.dim() == Spatial + 1 || x.dim() == Spatial + 2, "expected a ",
              Spatial + 1, "-D (unbatched) or ", Spatial + 2, "-D (batched) input, got shape ",
              shape_of(x));
  TORCH_CHECK(weight.dim() == Spatial + 2, "expected a ", Spatial + 2,
              "-D weight (out_channels, in_channels / groups, kernel...), got shape ",
              shape_of(weight));
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

// ---- pooling ----------------------------------------------------------------
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

// ---- normalisation ------------------------------------------------------------
// batch_norm(x, running_mean, running_var, weight, bias, {training, momentum, eps}):
// in training mode the batch statistics normalise and, when running stats are
// given, update them in place: new = (1 - momentum) * old + momentum * batch
// (the unbiased variance for running_var), as PyTorch.
Tensor batch_norm(lua_State* L, T x, OptTensor running_mean, OptTensor running_var,
                  OptTensor weight, OptTensor bias, Options o) {
  check_option_names(L, o, {"training", "momentum", "eps"});
  bool training = option_boolean(L, o, "training", false);
  TORCH_CHECK(x.dim() >= 2, "expected an input of at least 2 dims (N, C, ...), got shape ",
              shape_of(x));
  TORCH_CHECK(training || (running_mean && running_var),
              "running_mean and running_var are needed when not training");
  if (training) {
    int64_t per_channel = x.numel() / x.size(1);
    TORCH_CHECK(per_channel > 1,
                "expected more than 1 value per channel when training, got input shape ",
                shape_of(x));
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
              shape_of(x));
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

// ---- embedding and classes ------------------------------------------------------
// 1-based ids as LibTorch's 0-based ones; the first id out of 1..n is named.
Tensor zero_based_ids(T ids, int64_t n) {
  require_integer_tensor(ids, "ids", "1-based ids");
  if (ids.numel() > 0) {
    int64_t smallest = ids.min().item<int64_t>();
    TORCH_CHECK(smallest >= 1, "id ", smallest, " is out of range (ids are 1-based: 1 to ", n, ")");
    int64_t largest = ids.max().item<int64_t>();
    TORCH_CHECK(largest <= n, "id ", largest, " is out of range (ids are 1-based: 1 to ", n, ")");
  }
  return ids.to(at::kLong) - 1;
}

// embedding(ids, weight, {padding_idx, max_norm, norm_type, scale_grad_by_freq}).
// padding_idx is 1-based (negative counts from the end); its row gets no gradient.
Tensor embedding(lua_State* L, T ids, Tensor weight, Options o) {
  check_option_names(L, o, {"padding_idx", "max_norm", "norm_type", "scale_grad_by_freq"});
  TORCH_CHECK(weight.dim() == 2, "expected a 2-D weight (num_embeddings, dim), got shape ",
              shape_of(weight));
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

// ---- attention ----------------------------------------------------------------
// Whether `other` broadcasts to `target`'s shape, so it can be applied in place.
bool fits(const Tensor& target, const Tensor& other) {
  return at::infer_size(target.sizes(), other.sizes()) == target.sizes().vec();
}

// softmax(q k^T * scale + bias) v, with `blocked` positions (true) excluded and
// dropout on the weights; returns the output and the weights. `bias` (float)
// and `blocked` (bool) may be undefined. The scores are updated in place where
// they can be: matmul saves its inputs for backward, not its output.
std::tuple<Tensor, Tensor> attend(T q, T k, T v, const Tensor& bias, const Tensor& blocked,
                                  double dropout_p, double scale) {
  Tensor scores = at::matmul(q, k.transpose(-2, -1)).mul_(scale);
  const double inf = std::numeric_limits<double>::infinity();
  if (bias.defined()) scores = fits(scores, bias) ? scores.add_(bias) : scores + bias;
  if (blocked.defined()) {
    scores = fits(scores, blocked) ? scores.masked_fill_(blocked, -inf) : scores.masked_fill(blocked, -inf);
  }
  Tensor weights = at::softmax(scores, -1);
  if (dropout_p > 0.0) weights = at::dropout(weights, dropout_p, true);
  return {at::matmul(weights, v), weights};
}

// The union of two boolean masks (either may be undefined), broadcast.
Tensor either(const Tensor& a, const Tensor& b) {
  if (!a.defined()) return b;
  return b.defined() ? at::logical_or(a, b) : a;
}

Tensor causal_mask(int64_t l, int64_t s, const at::TensorOptions& options) {
  return at::ones({l, s}, options.dtype(at::kBool)).triu(1);  // true above the diagonal: blocked
}

// scaled_dot_product_attention(q, k, v, {attn_mask, is_causal, dropout_p, training, scale})
// with PyTorch 2's semantics: a boolean attn_mask is true where attention is
// allowed, a float one is added to the scores.
Tensor scaled_dot_product_attention(lua_State* L, T q, T k, T v, Options o) {
  check_option_names(L, o, {"attn_mask", "is_causal", "dropout_p", "training", "scale"});
  TORCH_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2,
              "q, k and v need at least 2 dims (..., L, E), got shapes ",
              shape_of(q), ", ", shape_of(k), ", ", shape_of(v));
  TORCH_CHECK(q.size(-1) == k.size(-1), "q has ", q.size(-1),
              " features per position but k has ", k.size(-1));
  OptTensor mask = option_tensor(L, o, "attn_mask");
  bool causal = option_boolean(L, o, "is_causal", false);
  TORCH_CHECK(!(mask && causal), "give attn_mask or is_causal, not both");
  Tensor bias, blocked;
  if (mask && mask->scalar_type() == at::kBool) {
    blocked = mask->logical_not();
  } else if (mask) {
    bias = *mask;
  }
  if (causal) blocked = causal_mask(q.size(-2), k.size(-2), q.options());
  double dropout_p = option_boolean(L, o, "training", true) ? option_number(L, o, "dropout_p", 0.0) : 0.0;
  double scale = option_number(L, o, "scale", 1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  return std::get<0>(attend(q, k, v, bias, blocked, dropout_p, scale));
}

// multi_head_attention(query, key, value, num_heads, in_proj_weight, in_proj_bias,
//                      out_proj_weight, out_proj_bias, {...}) -> output, weights
// PyTorch 1.13's multi_head_attention_forward on batch-first inputs (N, L, E),
// or unbatched (L, E). Masks follow nn.MultiheadAttention: a boolean
// key_padding_mask (N, S) or attn_mask (L, S) / (N * heads, L, S) is true where
// attention is NOT allowed; float masks are added to the scores.
Pushed multi_head_attention(lua_State* L, Tensor query, Tensor key, Tensor value, int64_t num_heads,
                            OptTensor in_proj_weight, OptTensor in_proj_bias, T out_proj_weight,
                            OptTensor out_proj_bias, Options o) {
  check_option_names(L, o, {"key_padding_mask", "attn_mask", "is_causal", "dropout_p", "training",
                    "need_weights", "average_attn_weights", "q_proj_weight", "k_proj_weight",
                    "v_proj_weight"});
  bool batched = query.dim() == 3;
  const bool self_attention = query.is_same(key) && key.is_same(value);
  TORCH_CHECK(query.dim() == 2 || batched,
              "expected query of shape (N, L, E) or unbatched (L, E), got ", shape_of(query));
  TORCH_CHECK(key.dim() == query.dim() && value.dim() == query.dim(),
              "query, key and value must all be batched or all unbatched, got shapes ",
              shape_of(query), ", ", shape_of(key), ", ", shape_of(value));
  OptTensor key_padding = option_tensor(L, o, "key_padding_mask");
  if (!batched) {
    query = query.unsqueeze(0);
    key = key.unsqueeze(0);
    value = value.unsqueeze(0);
    if (key_padding) key_padding = key_padding->unsqueeze(0);
  }
  const int64_t n = query.size(0), tgt = query.size(1), embed = query.size(2), src = key.size(1);
  TORCH_CHECK(num_heads >= 1 && embed % num_heads == 0, "embed_dim ", embed,
              " is not divisible by num_heads ", num_heads);
  TORCH_CHECK(key.size(0) == n && value.size(0) == n && value.size(1) == src,
              "key and value must have query's batch size and the same length, got shapes ",
              shape_of(query), ", ", shape_of(key), ", ", shape_of(value));
  const int64_t head_dim = embed / num_heads;

  Tensor q, k, v;
  OptTensor wq = option_tensor(L, o, "q_proj_weight");
  if (wq) {
    OptTensor wk = option_tensor(L, o, "k_proj_weight"), wv = option_tensor(L, o, "v_proj_weight");
    TORCH_CHECK(wk && wv, "q_proj_weight needs k_proj_weight and v_proj_weight");
    std::vector<Tensor> b(3);
    if (in_proj_bias) b = in_proj_bias->chunk(3);
    q = at::linear(query, *wq, in_proj_bias ? OptTensor(b[0]) : c10::nullopt);
    k = at::linear(key, *wk, in_proj_bias ? OptTensor(b[1]) : c10::nullopt);
    v = at::linear(value, *wv, in_proj_bias ? OptTensor(b[2]) : c10::nullopt);
  } else {
    TORCH_CHECK(in_proj_weight && in_proj_weight->dim() == 2 && in_proj_weight->size(0) == 3 * embed &&
                    in_proj_weight->size(1) == embed,
                "in_proj_weight must have shape [", 3 * embed, "x", embed, "], got ",
                in_proj_weight ? shape_of(*in_proj_weight) : "nil");
    TORCH_CHECK(key.size(2) == embed && value.size(2) == embed,
                "key and value must have embed_dim ", embed, " features, got shapes ",
                shape_of(key), ", ", shape_of(value));
    if (self_attention) {  // one projection serves q, k and v
      auto parts = at::linear(query, *in_proj_weight, in_proj_bias).chunk(3, -1);
      q = parts[0], k = parts[1], v = parts[2];
    } else {
      auto w = in_proj_weight->chunk(3);
      std::vector<Tensor> b(3);
      if (in_proj_bias) b = in_proj_bias->chunk(3);
      q = at::linear(query, w[0], in_proj_bias ? OptTensor(b[0]) : c10::nullopt);
      k = at::linear(key, w[1], in_proj_bias ? OptTensor(b[1]) : c10::nullopt);
      v = at::linear(value, w[2], in_proj_bias ? OptTensor(b[2]) : c10::nullopt);
    }
  }
  // (N, L, H * D) -> (N, H, L, D)
  auto heads = [&](const Tensor& t, int64_t len) {
    return t.reshape({n, len, num_heads, head_dim}).transpose(1, 2);
  };
  q = heads(q, tgt), k = heads(k, src), v = heads(v, src);

  // Float masks add up to one bias and boolean ones to one blocked mask, both
  // broadcastable to the scores (N, H, L, S).
  Tensor bias, blocked;
  auto add_mask = [&](const Tensor& m) {
    if (m.scalar_type() == at::kBool) {
      blocked = either(blocked, m);
    } else {
      bias = bias.defined() ? bias + m : m;
    }
  };
  OptTensor attn_mask = option_tensor(L, o, "attn_mask");
  if (attn_mask) {
    Tensor m = *attn_mask;
    TORCH_CHECK(m.scalar_type() == at::kBool || m.is_floating_point(),
                "attn_mask must be bool or floating point, got ", dtype_name(m.scalar_type()));
    if (m.dim() == 2) {
      TORCH_CHECK(m.size(0) == tgt && m.size(1) == src, "the 2-D attn_mask has shape ",
                  shape_of(m), ", but should be [", tgt, "x", src, "]");
    } else {
      TORCH_CHECK(m.dim() == 3 && m.size(0) == n * num_heads && m.size(1) == tgt && m.size(2) == src,
                  "the attn_mask has shape ", shape_of(m), ", but should be [", tgt, "x",
                  src, "] or [", n * num_heads, "x", tgt, "x", src, "]");
      m = m.view({n, num_heads, tgt, src});
    }
    add_mask(m);
  }
  if (option_boolean(L, o, "is_causal", false)) add_mask(causal_mask(tgt, src, q.options()));
  if (key_padding) {
    Tensor m = *key_padding;
    TORCH_CHECK(m.dim() == 2 && m.size(0) == n && m.size(1) == src,
                "key_padding_mask has shape ", shape_of(m), ", but should be [", n, "x", src, "]");
    add_mask(m.view({n, 1, 1, src}));
  }

  double dropout_p = option_boolean(L, o, "training", true) ? option_number(L, o, "dropout_p", 0.0) : 0.0;
  auto [attended, weights] =
      attend(q, k, v, bias, blocked, dropout_p, 1.0 / std::sqrt(static_cast<double>(head_dim)));
  Tensor out = at::linear(attended.transpose(1, 2).reshape({n, tgt, embed}), out_proj_weight, out_proj_bias);
  if (!batched) out = out.squeeze(0);
  if (!option_boolean(L, o, "need_weights", true)) return Pushed{push(L, out)};
  if (option_boolean(L, o, "average_attn_weights", true)) weights = weights.mean(1);
  if (!batched) weights = weights.squeeze(0);
  return Pushed{push(L, std::make_tuple(out, weights))};
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

std::vector<Binding> nn_layer_bindings() {
  return {
      bind("conv1d", [](lua_State* L, T x, T w, OptTensor b, Options o) { return conv<1>(L, x, w, b, o); }),
      bind("conv2d", [](lua_State* L, T x, T w, OptTensor b, Options o) { return conv<2>(L, x, w, b, o); }),
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
      bind("batch_norm", batch_norm),
      bind("layer_norm", layer_norm),
      bind("group_norm", group_norm),
      bind("normalize", normalize),
      bind("embedding", embedding),
      bind("one_hot", one_hot),
      bind("bilinear", [](T x1, T x2, T weight, OptTensor bias) {
        return at::bilinear(x1, x2, weight, bias);
      }),
      bind("scaled_dot_product_attention", scaled_dot_product_attention),
      bind("multi_head_attention", multi_head_attention),
      bind("pad", pad),
      bind("dropout2d", [](T x, double p, c10::optional<bool> training) {
        return at::feature_dropout(x, p, training.value_or(true));
      }),

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
  };
}

}  // namespace accel::lua
