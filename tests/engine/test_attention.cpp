// Attention in the engine. Scaled dot-product attention against a plain
// reference: for each query position, scores by explicit dot products, a
// softmax written out, and the weighted sum of values, in double precision.
// Multi-head attention is compared with PyTorch's numbers in
// tests/lua/test_nn_layers.lua; here, with the attention it is built on.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <torch/autograd.h>

#include "engine/nn/attention.h"

namespace {

// q [L, E], k [S, E], v [S, Ev]; allowed(i, j) says whether query i may
// see key j; `bias` [L, S] is added to the scores when defined.
template <class Allowed>
at::Tensor reference_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               double scale, Allowed allowed, const at::Tensor& bias = {}) {
  const int64_t l = q.size(0), s = k.size(0), e = q.size(1), ev = v.size(1);
  auto qa = q.accessor<double, 2>(), ka = k.accessor<double, 2>(), va = v.accessor<double, 2>();
  at::Tensor out = at::zeros({l, ev}, at::kDouble);
  auto oa = out.accessor<double, 2>();
  for (int64_t i = 0; i < l; ++i) {
    std::vector<double> scores(static_cast<size_t>(s), -std::numeric_limits<double>::infinity());
    double largest = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < s; ++j) {
      if (!allowed(i, j)) continue;
      double dot = 0.0;
      for (int64_t c = 0; c < e; ++c) dot += qa[i][c] * ka[j][c];
      double score = dot * scale + (bias.defined() ? bias[i][j].item<double>() : 0.0);
      scores[static_cast<size_t>(j)] = score;
      largest = std::max(largest, score);
    }
    double total = 0.0;
    for (double& x : scores) total += (x = std::exp(x - largest));
    for (int64_t j = 0; j < s; ++j) {
      for (int64_t c = 0; c < ev; ++c) oa[i][c] += scores[static_cast<size_t>(j)] / total * va[j][c];
    }
  }
  return out;
}

const auto everywhere = [](int64_t, int64_t) { return true; };

}  // namespace

TEST_CASE("scaled dot-product attention matches the plain computation") {
  at::manual_seed(7);
  at::Tensor q = at::randn({4, 3}, at::kDouble), k = at::randn({5, 3}, at::kDouble),
             v = at::randn({5, 2}, at::kDouble);

  SECTION("default scale 1 / sqrt(E)") {
    at::Tensor out = accel::nn::scaled_dot_product_attention(q, k, v, {});
    REQUIRE(at::allclose(out, reference_attention(q, k, v, 1.0 / std::sqrt(3.0), everywhere)));
  }
  SECTION("a given scale") {
    accel::nn::AttentionOptions options;
    options.scale = 0.25;
    at::Tensor out = accel::nn::scaled_dot_product_attention(q, k, v, options);
    REQUIRE(at::allclose(out, reference_attention(q, k, v, 0.25, everywhere)));
  }
  SECTION("is_causal hides later keys") {
    accel::nn::AttentionOptions options;
    options.is_causal = true;
    at::Tensor out = accel::nn::scaled_dot_product_attention(q, k, v, options);
    auto causal = [](int64_t i, int64_t j) { return j <= i; };
    REQUIRE(at::allclose(out, reference_attention(q, k, v, 1.0 / std::sqrt(3.0), causal)));
  }
  SECTION("a boolean mask is true where attention is allowed") {
    at::Tensor mask = at::rand({4, 5}).gt(0.4);
    mask.select(1, 0).fill_(true);  // every query sees at least one key
    accel::nn::AttentionOptions options;
    options.attn_mask = mask;
    at::Tensor out = accel::nn::scaled_dot_product_attention(q, k, v, options);
    auto allowed = [&](int64_t i, int64_t j) { return mask[i][j].item<bool>(); };
    REQUIRE(at::allclose(out, reference_attention(q, k, v, 1.0 / std::sqrt(3.0), allowed)));
  }
  SECTION("a float mask is added to the scores") {
    at::Tensor bias = at::randn({4, 5}, at::kDouble);
    accel::nn::AttentionOptions options;
    options.attn_mask = bias;
    at::Tensor out = accel::nn::scaled_dot_product_attention(q, k, v, options);
    REQUIRE(at::allclose(out, reference_attention(q, k, v, 1.0 / std::sqrt(3.0), everywhere, bias)));
  }
  SECTION("batch dims broadcast through") {
    at::Tensor qb = at::stack({q, q * 2}), kb = at::stack({k, k}), vb = at::stack({v, v});
    at::Tensor out = accel::nn::scaled_dot_product_attention(qb, kb, vb, {});
    REQUIRE(at::allclose(out[1], reference_attention(q * 2, k, v, 1.0 / std::sqrt(3.0), everywhere)));
  }
}

TEST_CASE("scaled dot-product attention refuses a mask together with is_causal") {
  at::Tensor x = at::randn({2, 2});
  accel::nn::AttentionOptions options;
  options.attn_mask = at::ones({2, 2}, at::kBool);
  options.is_causal = true;
  REQUIRE_THROWS_WITH(accel::nn::scaled_dot_product_attention(x, x, x, options),
                      Catch::Contains("give attn_mask or is_causal, not both"));
}

TEST_CASE("one-head attention with identity projections is scaled dot-product attention") {
  at::manual_seed(11);
  at::Tensor x = at::randn({2, 4, 3}, at::kDouble), memory = at::randn({2, 5, 3}, at::kDouble);
  accel::nn::MultiHeadAttentionWeights weights;
  weights.in_proj_weight = at::eye(3, at::kDouble).repeat({3, 1});
  weights.out_proj_weight = at::eye(3, at::kDouble);
  auto [out, attention] = accel::nn::multi_head_attention(x, memory, memory, 1, weights, {});
  REQUIRE(at::allclose(out, accel::nn::scaled_dot_product_attention(x, memory, memory, {})));
  REQUIRE(attention.sizes() == at::IntArrayRef({2, 4, 5}));
  REQUIRE(at::allclose(attention.sum(-1), at::ones({2, 4}, at::kDouble)));
}

// Grouped-query attention folds the query heads that share a key/value head
// along the length instead of repeating k and v: the same numbers, gradients
// and dropout draws as attention over the repeated heads, under every mask
// layout the models give (shared by all heads, per head, per key only).
TEST_CASE("grouped-query attention equals attention over repeated key/value heads") {
  at::manual_seed(5);
  const int64_t batch = 2, heads = 6, kv_heads = 2, l = 3, s = 4, e = 5;
  const at::Tensor q = at::randn({batch, heads, l, e}, at::kDouble).requires_grad_(),
                   k = at::randn({batch, kv_heads, s, e}, at::kDouble).requires_grad_(),
                   v = at::randn({batch, kv_heads, s, e}, at::kDouble).requires_grad_();
  const auto compare = [&](accel::nn::AttentionOptions options) {
    accel::nn::AttentionOptions grouped = options;
    grouped.enable_gqa = true;
    at::manual_seed(1);
    const at::Tensor out = accel::nn::scaled_dot_product_attention(q, k, v, grouped);
    const auto grads = torch::autograd::grad({out.pow(2).sum()}, {q, k, v});
    at::manual_seed(1);
    const at::Tensor expected = accel::nn::scaled_dot_product_attention(
        q, k.repeat_interleave(heads / kv_heads, 1), v.repeat_interleave(heads / kv_heads, 1), options);
    const auto expected_grads = torch::autograd::grad({expected.pow(2).sum()}, {q, k, v});
    REQUIRE(out.sizes() == expected.sizes());
    REQUIRE(at::allclose(out, expected, 1e-12, 1e-12));
    for (size_t i = 0; i < grads.size(); ++i) REQUIRE(at::allclose(grads[i], expected_grads[i], 1e-12, 1e-12));
  };
  SECTION("no mask") { compare({}); }
  SECTION("causal") {
    accel::nn::AttentionOptions options;
    options.is_causal = true;
    compare(options);
  }
  SECTION("a boolean mask per batch row, shared by the heads") {
    accel::nn::AttentionOptions options;
    at::Tensor mask = at::rand({batch, 1, l, s}).gt(0.3);
    mask.select(-1, 0).fill_(true);
    options.attn_mask = mask;
    compare(options);
  }
  SECTION("a boolean mask of (L, S)") {
    accel::nn::AttentionOptions options;
    options.attn_mask = at::ones({l, s}, at::kBool).tril(1);
    compare(options);
  }
  SECTION("a boolean mask per head") {
    accel::nn::AttentionOptions options;
    at::Tensor mask = at::rand({batch, heads, l, s}).gt(0.3);
    mask.select(-1, 0).fill_(true);
    options.attn_mask = mask;
    compare(options);
  }
  SECTION("a float mask over keys only (padding), and one per head and key") {
    accel::nn::AttentionOptions options;
    options.attn_mask = at::randn({batch, 1, 1, s}, at::kDouble);
    compare(options);
    options.attn_mask = at::randn({batch, heads, 1, s}, at::kDouble);
    compare(options);
  }
  SECTION("dropout draws the same mask") {
    accel::nn::AttentionOptions options;
    options.dropout_p = 0.3;
    compare(options);
  }
}
