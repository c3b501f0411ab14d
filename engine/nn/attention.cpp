#include "engine/nn/attention.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <cmath>
#include <limits>
#include <string>

#include "engine/compat.h"
#include "engine/nn/linear.h"
#include "engine/tensor_description.h"

namespace accel::nn {
namespace {

using at::Tensor;
using OptTensor = c10::optional<Tensor>;

// Whether `other` broadcasts to `target`'s shape, so it can be applied in place.
bool fits(const at::Tensor& target, const at::Tensor& other) {
  return at::infer_size(target.sizes(), other.sizes()) == target.sizes().vec();
}

// The union of two boolean masks (either may be undefined), broadcast.
Tensor either(const Tensor& a, const Tensor& b) {
  if (!a.defined()) return b;
  return b.defined() ? at::logical_or(a, b) : a;
}

#if !ACCEL_TORCH_AT_LEAST(2, 0)
// A mask for (..., H, L, S) scores laid out for grouped queries,
// (..., H / G, G * L, S): a mask shared by every head is repeated G times
// along the length, a per-head one regrouped.
Tensor fold_mask(Tensor mask, int64_t groups, int64_t length) {
  if (!mask.defined() || groups == 1) return mask;
  while (mask.dim() < 3) mask = mask.unsqueeze(0);
  std::vector<int64_t> sizes = mask.sizes().vec();
  const int64_t heads = sizes.end()[-3];
  if (heads == 1 && sizes.end()[-2] == 1) return mask;  // broadcasts over heads and length alike
  sizes.end()[-2] = length;
  mask = mask.expand(sizes);
  if (heads == 1) {
    std::vector<int64_t> repeated = sizes;
    repeated.insert(repeated.end() - 2, groups);
    mask = mask.unsqueeze(-3).expand(repeated);
  }
  sizes.end()[-3] = heads == 1 ? 1 : heads / groups;
  sizes.end()[-2] = groups * length;
  return mask.reshape(sizes);
}
#endif

// LibTorch 2's fused attention (flash, memory-efficient or cuDNN kernels on
// a GPU, a flash kernel on the CPU) keeps no L x S matrix for backward, where
// `attend` keeps the weights, their dropout mask and the dropped weights of
// every layer (on LibTorch 1.13 RecomputedAttention, below, keeps none when
// there is no dropout). It is taken whenever the weights are not
// asked for, as PyTorch 2's multi_head_attention_forward does with
// need_weights=False. Its mask: true where attention is allowed, or added to
// the scores in the query's dtype; `causal` is the kernels' own causal flag,
// given only when no mask was made.
#if ACCEL_TORCH_AT_LEAST(2, 0)
Tensor fused(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias,
             const Tensor& blocked, bool causal, double dropout_p, double scale) {
  OptTensor mask;
  if (bias.defined()) {
    Tensor b = bias.to(q.scalar_type());
    mask = blocked.defined() ? b.masked_fill(blocked, -std::numeric_limits<double>::infinity()) : b;
  } else if (blocked.defined()) {
    mask = blocked.logical_not();
  }
  return at::scaled_dot_product_attention(q, k, v, mask, dropout_p, causal, scale);
}
#endif

// q k^T * scale + bias, with the `blocked` positions at -inf (bias and
// blocked may be undefined): the scores, updated in place where they can be,
// as matmul saves its inputs for backward, not its output.
Tensor masked_scores(const Tensor& q, const Tensor& k, const Tensor& bias, const Tensor& blocked, double scale) {
  Tensor scores = at::matmul(q, k.transpose(-2, -1)).mul_(scale);
  const double inf = std::numeric_limits<double>::infinity();
  if (bias.defined()) scores = fits(scores, bias) ? scores.add_(bias) : scores + bias;
  if (blocked.defined()) {
    scores = fits(scores, blocked) ? scores.masked_fill_(blocked, -inf) : scores.masked_fill(blocked, -inf);
  }
  return scores;
}

#if !ACCEL_TORCH_AT_LEAST(2, 0)
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Attention without dropout whose backward recomputes the weights, as the
// fused kernels of LibTorch 2 do: autograd through `attend` keeps every
// layer's weights (..., L, S) until backward, this keeps q, k, v, the masks
// and each row's log-sum-exp; not the output, which the fused kernels keep
// but a model's next op copies (kept for this alone, it would cost a quarter
// of the weights at 64 features a head). For grouped queries q comes folded
// (see scaled_dot_product_attention) and the masks unfolded, folded here in
// forward and again in backward: a mask shared by the heads, folded, is G
// copies of it. The output is `attend`'s, to the bit. A row with every key
// blocked gives NaN, as softmax does: its log-sum-exp is -inf, and
// exp(-inf - -inf) is NaN.
struct RecomputedAttention : public torch::autograd::Function<RecomputedAttention> {
  static Tensor forward(AutogradContext* ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                        const OptTensor& bias, const OptTensor& blocked, int64_t groups, double scale) {
    const Tensor b = bias.value_or(Tensor()), m = blocked.value_or(Tensor());
    const int64_t length = q.size(-2) / groups;
    const Tensor scores = masked_scores(q, k, fold_mask(b, groups, length), fold_mask(m, groups, length), scale);
    const Tensor logsumexp = at::logsumexp(scores, -1, /*keepdim=*/true);
    const Tensor out = at::matmul(at::softmax(scores, -1), v);
    ctx->save_for_backward({q, k, v, b, m, logsumexp});
    ctx->saved_data["groups"] = groups;
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["bias"] = b.defined();
    return out;
  }

  // dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(P dP)), zero where
  // blocked (as masked_fill's backward makes it: a row with every key
  // blocked has NaN weights but no gradient for its scores), dQ = dS K
  // scale, dK = dS^T Q scale, d bias = dS unfolded and summed to the bias's
  // shape. With create_graph (grad mode on in backward) the gradients carry
  // their own history: nothing is updated in place, and the weights come
  // from softmax, as the saved log-sum-exp, computed without grad, has none.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Tensor &q = saved[0], &k = saved[1], &v = saved[2], &bias = saved[3], &blocked = saved[4],
                 &logsumexp = saved[5];
    const int64_t groups = ctx->saved_data["groups"].toInt(), length = q.size(-2) / groups;
    const double scale = ctx->saved_data["scale"].toDouble();
    const bool has_bias = ctx->saved_data["bias"].toBool();
    const bool differentiable = at::GradMode::is_enabled();
    const Tensor& grad = grads[0];
    const Tensor folded_blocked = fold_mask(blocked, groups, length);
    Tensor scores = masked_scores(q, k, fold_mask(bias, groups, length), folded_blocked, scale);
    const Tensor weights = differentiable ? at::softmax(scores, -1) : scores.sub_(logsumexp).exp_();
    const Tensor dv = at::sum_to(at::matmul(weights.transpose(-2, -1), grad), v.sizes());
    Tensor dscores = at::matmul(grad, v.transpose(-2, -1));
    const Tensor rows = (weights * dscores).sum(-1, /*keepdim=*/true);
    dscores = differentiable ? weights * (dscores - rows) : dscores.sub_(rows).mul_(weights);
    if (blocked.defined()) {
      dscores = differentiable ? dscores.masked_fill(folded_blocked, 0) : dscores.masked_fill_(folded_blocked, 0);
    }
    Tensor dq, dk, dbias;
    if (ctx->needs_input_grad(0)) dq = at::sum_to(at::matmul(dscores, k) * scale, q.sizes());
    if (ctx->needs_input_grad(1)) dk = at::sum_to(at::matmul(dscores.transpose(-2, -1), q) * scale, k.sizes());
    // The bias, when given, is the fourth tensor input, and so the fourth
    // edge. Unfolded, (..., H / G, G * L, S) -> (..., H, L, S): q's heads.
    if (has_bias && ctx->needs_input_grad(3)) {
      std::vector<int64_t> unfolded = dscores.sizes().vec();
      unfolded.end()[-3] *= groups;
      unfolded.end()[-2] = length;
      dbias = at::sum_to(dscores.reshape(unfolded), bias.sizes());
    }
    return {dq, dk, dv, dbias, Tensor(), Tensor(), Tensor()};
  }
};
#endif

// softmax(q k^T * scale + bias) v with `blocked` positions excluded, the
// weights not kept: recomputed in backward where LibTorch 1.13 would keep
// them (no dropout, gradients recorded, outside autocast, whose casts this
// path does not repeat). q comes folded for `groups` query heads a key/value
// head, the masks not.
Tensor attention_output(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias,
                        const Tensor& blocked, [[maybe_unused]] int64_t groups, double dropout_p,
                        double scale) {
#if !ACCEL_TORCH_AT_LEAST(2, 0)
  const bool tracked = at::GradMode::is_enabled() && (q.requires_grad() || k.requires_grad() ||
                                                      v.requires_grad() || (bias.defined() && bias.requires_grad()));
  const bool same_dtype = k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type() &&
                          (!bias.defined() || bias.scalar_type() == q.scalar_type());
  if (dropout_p == 0.0 && tracked && same_dtype && !compat::autocast_enabled(q.device().type())) {
    return RecomputedAttention::apply(q, k, v, bias.defined() ? OptTensor(bias) : c10::nullopt,
                                      blocked.defined() ? OptTensor(blocked) : c10::nullopt, groups, scale);
  }
  const int64_t length = q.size(-2) / groups;
  return std::get<0>(attend(q, k, v, fold_mask(bias, groups, length), fold_mask(blocked, groups, length),
                            dropout_p, scale));
#else
  return std::get<0>(attend(q, k, v, bias, blocked, dropout_p, scale));
#endif
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> attend(const at::Tensor& q, const at::Tensor& k,
                                          const at::Tensor& v, const at::Tensor& bias,
                                          const at::Tensor& blocked, double dropout_p,
                                          double scale) {
  at::Tensor weights = at::softmax(masked_scores(q, k, bias, blocked, scale), -1);
  if (dropout_p > 0.0) weights = at::dropout(weights, dropout_p, true);
  return {at::matmul(weights, v), weights};
}

at::Tensor causal_mask(int64_t l, int64_t s, const at::TensorOptions& options) {
  return at::ones({l, s}, options.dtype(at::kBool)).triu(1);
}

at::Tensor scaled_dot_product_attention(const at::Tensor& q, const at::Tensor& k,
                                        const at::Tensor& v, const AttentionOptions& options) {
  TORCH_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2,
              "q, k and v need at least 2 dims (..., L, E), got shapes ",
              shape_text(q.sizes()), ", ", shape_text(k.sizes()), ", ", shape_text(v.sizes()));
  TORCH_CHECK(q.size(-1) == k.size(-1), "q has ", q.size(-1),
              " features per position but k has ", k.size(-1));
  const c10::optional<at::Tensor>& mask = options.attn_mask;
  TORCH_CHECK(!(mask && options.is_causal), "give attn_mask or is_causal, not both");
  at::Tensor bias, blocked;
  if (mask && mask->scalar_type() == at::kBool) {
    blocked = mask->logical_not();
  } else if (mask) {
    bias = *mask;
  }
  const double scale = options.scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  int64_t groups = 1;  // query heads per key/value head
  if (options.enable_gqa) {
    TORCH_CHECK(q.dim() >= 3 && k.dim() == q.dim() && v.dim() == q.dim(),
                "grouped-query attention needs q, k and v of shape (..., heads, L, E), got shapes ",
                shape_text(q.sizes()), ", ", shape_text(k.sizes()), ", ", shape_text(v.sizes()));
    const int64_t heads = q.size(-3), kv_heads = k.size(-3);
    TORCH_CHECK(kv_heads > 0 && heads % kv_heads == 0 && v.size(-3) == kv_heads, "grouped-query attention: q's ",
                heads, " heads must be a multiple of k's and v's (", kv_heads, " and ", v.size(-3), ")");
    groups = heads / kv_heads;
  }
#if ACCEL_TORCH_AT_LEAST(2, 0)
  // The fused kernels take their causal flag only for q's own layout: the
  // key/value heads are repeated for them.
  if (groups > 1) {
    return fused(q, k.repeat_interleave(groups, -3), v.repeat_interleave(groups, -3), bias, blocked,
                 options.is_causal, options.dropout_p, scale);
  }
  return fused(q, k, v, bias, blocked, options.is_causal, options.dropout_p, scale);
#else
  if (options.is_causal) blocked = causal_mask(q.size(-2), k.size(-2), q.options());
  if (groups == 1) return attention_output(q, k, v, bias, blocked, 1, options.dropout_p, scale);
  // The query heads that share a key/value head are laid end to end along
  // the length, (..., H, L, E) -> (..., H / G, G * L, E), so each key/value
  // head meets all of its queries in one product and k and v are never
  // repeated (a copy of the whole cache at every decoding step otherwise).
  // The element order is the repeated form's, dropout's draws included.
  // The masks are folded alike, by attention_output.
  std::vector<int64_t> folded = q.sizes().vec();
  folded.end()[-3] /= groups;
  folded.end()[-2] *= groups;
  const Tensor out = attention_output(q.reshape(folded), k, v, bias, blocked, groups, options.dropout_p, scale);
  std::vector<int64_t> shape = q.sizes().vec();
  shape.back() = v.size(-1);
  return out.reshape(shape);
#endif
}

std::tuple<at::Tensor, at::Tensor> multi_head_attention(at::Tensor query, at::Tensor key,
                                                        at::Tensor value, int64_t num_heads,
                                                        const MultiHeadAttentionWeights& weights,
                                                        const MultiHeadAttentionOptions& options) {
  bool batched = query.dim() == 3;
  const bool self_attention = query.is_same(key) && key.is_same(value);
  TORCH_CHECK(query.dim() == 2 || batched,
              "expected query of shape (N, L, E) or unbatched (L, E), got ", shape_text(query.sizes()));
  TORCH_CHECK(key.dim() == query.dim() && value.dim() == query.dim(),
              "query, key and value must all be batched or all unbatched, got shapes ",
              shape_text(query.sizes()), ", ", shape_text(key.sizes()), ", ", shape_text(value.sizes()));
  OptTensor key_padding = options.key_padding_mask;
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
              shape_text(query.sizes()), ", ", shape_text(key.sizes()), ", ", shape_text(value.sizes()));
  const int64_t head_dim = embed / num_heads;

  Tensor q, k, v;
  const OptTensor& in_proj_weight = weights.in_proj_weight;
  const OptTensor& in_proj_bias = weights.in_proj_bias;
  if (const OptTensor& wq = weights.q_proj_weight) {
    const OptTensor &wk = weights.k_proj_weight, &wv = weights.v_proj_weight;
    TORCH_CHECK(wk && wv, "q_proj_weight needs k_proj_weight and v_proj_weight");
    std::vector<Tensor> b(3);
    if (in_proj_bias) b = in_proj_bias->chunk(3);
    q = nn::linear(query, *wq, in_proj_bias ? OptTensor(b[0]) : c10::nullopt);
    k = nn::linear(key, *wk, in_proj_bias ? OptTensor(b[1]) : c10::nullopt);
    v = nn::linear(value, *wv, in_proj_bias ? OptTensor(b[2]) : c10::nullopt);
  } else {
    TORCH_CHECK(in_proj_weight && in_proj_weight->dim() == 2 && in_proj_weight->size(0) == 3 * embed &&
                    in_proj_weight->size(1) == embed,
                "in_proj_weight must have shape [", 3 * embed, "x", embed, "], got ",
                in_proj_weight ? shape_text(in_proj_weight->sizes()) : "nil");
    TORCH_CHECK(key.size(2) == embed && value.size(2) == embed,
                "key and value must have embed_dim ", embed, " features, got shapes ",
                shape_text(key.sizes()), ", ", shape_text(value.sizes()));
    if (self_attention) {  // one projection serves q, k and v
      auto parts = nn::linear(query, *in_proj_weight, in_proj_bias).chunk(3, -1);
      q = parts[0], k = parts[1], v = parts[2];
    } else {
      auto w = in_proj_weight->chunk(3);
      std::vector<Tensor> b(3);
      if (in_proj_bias) b = in_proj_bias->chunk(3);
      q = nn::linear(query, w[0], in_proj_bias ? OptTensor(b[0]) : c10::nullopt);
      k = nn::linear(key, w[1], in_proj_bias ? OptTensor(b[1]) : c10::nullopt);
      v = nn::linear(value, w[2], in_proj_bias ? OptTensor(b[2]) : c10::nullopt);
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
  const OptTensor& attn_mask = options.attn_mask;
  if (attn_mask) {
    Tensor m = *attn_mask;
    TORCH_CHECK(m.scalar_type() == at::kBool || m.is_floating_point(),
                "attn_mask must be bool or floating point, got ", dtype_text(m.scalar_type()));
    if (m.dim() == 2) {
      TORCH_CHECK(m.size(0) == tgt && m.size(1) == src, "the 2-D attn_mask has shape ",
                  shape_text(m.sizes()), ", but should be [", tgt, ", ", src, "]");
    } else {
      TORCH_CHECK(m.dim() == 3 && m.size(0) == n * num_heads && m.size(1) == tgt && m.size(2) == src,
                  "the attn_mask has shape ", shape_text(m.sizes()), ", but should be [", tgt, ", ",
                  src, "] or [", n * num_heads, ", ", tgt, ", ", src, "]");
      m = m.view({n, num_heads, tgt, src});
    }
    add_mask(m);
  }
  // is_causal alone, fused, is the kernels' own causal flag: no mask is made.
  const bool causal_only = options.is_causal && !attn_mask && !key_padding;
  const bool fuse = ACCEL_TORCH_AT_LEAST(2, 0) && !options.need_weights;
  if (options.is_causal && !(causal_only && fuse)) add_mask(causal_mask(tgt, src, q.options()));
  if (key_padding) {
    Tensor m = *key_padding;
    TORCH_CHECK(m.dim() == 2 && m.size(0) == n && m.size(1) == src,
                "key_padding_mask has shape ", shape_text(m.sizes()), ", but should be [", n, ", ", src, "]");
    add_mask(m.view({n, 1, 1, src}));
  }

  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  Tensor attended, attention;
#if ACCEL_TORCH_AT_LEAST(2, 0)
  if (fuse) attended = fused(q, k, v, bias, blocked, causal_only, options.dropout_p, scale);
#endif
  if (!fuse && options.need_weights) {
    std::tie(attended, attention) = attend(q, k, v, bias, blocked, options.dropout_p, scale);
  } else if (!fuse) {
    attended = attention_output(q, k, v, bias, blocked, 1, options.dropout_p, scale);
  }
  Tensor out = nn::linear(attended.transpose(1, 2).reshape({n, tgt, embed}), weights.out_proj_weight,
                          weights.out_proj_bias);
  if (!batched) out = out.squeeze(0);
  if (!options.need_weights) return {out, Tensor()};
  if (options.average_attn_weights) attention = attention.mean(1);
  if (!batched) attention = attention.squeeze(0);
  return {out, attention};
}

}  // namespace accel::nn
