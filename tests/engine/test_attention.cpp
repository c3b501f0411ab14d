// Attention in the engine. Scaled dot-product attention against a plain
// reference: for each query position, scores by explicit dot products, a
// softmax written out, and the weighted sum of values, in double precision.
// Multi-head attention is compared with PyTorch's numbers in
// tests/lua/test_nn_layers.lua; here, with the attention it is built on.
// Attention whose backward recomputes the weights is compared with autograd
// through the plain computation, `attend`.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <tuple>
#include <vector>

#include <torch/autograd.h>

#include "engine/caching_cpu_allocator.h"
#include "engine/compat.h"
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

namespace {

// The plain computation scaled_dot_product_attention stands for: `attend`,
// which autograd runs through op by op, keeping the weights, over key/value
// heads repeated for grouped queries.
at::Tensor plain_attention(const at::Tensor& q, at::Tensor k, at::Tensor v,
                           const accel::nn::AttentionOptions& options) {
  if (options.enable_gqa) {
    k = k.repeat_interleave(q.size(-3) / k.size(-3), -3);
    v = v.repeat_interleave(q.size(-3) / v.size(-3), -3);
  }
  at::Tensor bias, blocked;
  if (options.attn_mask && options.attn_mask->scalar_type() == at::kBool) {
    blocked = options.attn_mask->logical_not();
  } else if (options.attn_mask) {
    bias = *options.attn_mask;
  }
  if (options.is_causal) blocked = accel::nn::causal_mask(q.size(-2), k.size(-2), q.options());
  const double scale = options.scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  return std::get<0>(accel::nn::attend(q, k, v, bias, blocked, 0.0, scale));
}

// The output and the gradients of a weighted sum of it, w.r.t. `inputs`.
std::vector<at::Tensor> output_and_grads(const at::Tensor& out, const at::Tensor& weight,
                                         const std::vector<at::Tensor>& inputs) {
  std::vector<at::Tensor> result = torch::autograd::grad({(out * weight).sum()}, inputs);
  result.insert(result.begin(), out);
  return result;
}

}  // namespace

// Without dropout, with gradients recorded, attention keeps no weights for
// backward and recomputes them there (as LibTorch 2's fused kernels do): the
// same output and gradients as autograd through the plain computation, for q,
// k, v and a float mask, under every mask layout the models give.
TEST_CASE("attention that recomputes its weights in backward equals the plain computation") {
  at::manual_seed(3);
  const int64_t batch = 2, heads = 4, l = 5, s = 6, e = 3;
  const at::Tensor weight = at::randn({batch, heads, l, e}, at::kDouble);
  const auto compare = [&](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const accel::nn::AttentionOptions& options) {
    std::vector<at::Tensor> inputs;
    for (const at::Tensor& t : {q, k, v, options.attn_mask.value_or(at::Tensor())}) {
      if (t.defined() && t.requires_grad()) inputs.push_back(t);
    }
    const auto got = output_and_grads(accel::nn::scaled_dot_product_attention(q, k, v, options), weight, inputs);
    const auto expected = output_and_grads(plain_attention(q, k, v, options), weight, inputs);
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("tensor " << i << " (the output, then the gradients of q, k, v and the mask that need them)");
      REQUIRE(got[i].sizes() == expected[i].sizes());
      REQUIRE(at::allclose(got[i], expected[i], 1e-6, 1e-6));
    }
  };
  const at::Tensor q = at::randn({batch, heads, l, e}, at::kDouble).requires_grad_(),
                   k = at::randn({batch, heads, s, e}, at::kDouble).requires_grad_(),
                   v = at::randn({batch, heads, s, e}, at::kDouble).requires_grad_();
  // Grouped queries: two key/value heads for the four query heads.
  const at::Tensor gk = at::randn({batch, 2, s, e}, at::kDouble).requires_grad_(),
                   gv = at::randn({batch, 2, s, e}, at::kDouble).requires_grad_();
  const auto both = [&](const accel::nn::AttentionOptions& options) {
    compare(q, k, v, options);
    accel::nn::AttentionOptions grouped = options;
    grouped.enable_gqa = true;
    compare(q, gk, gv, grouped);
  };
  const auto masked = [](at::Tensor mask) {
    accel::nn::AttentionOptions options;
    options.attn_mask = mask;
    return options;
  };
  const auto allowed = [&](std::vector<int64_t> sizes) {
    at::Tensor mask = at::rand(sizes).gt(0.3);
    mask.select(-1, 0).fill_(true);  // every query sees a key
    return mask;
  };

  SECTION("no mask, and a given scale") {
    both({});
    accel::nn::AttentionOptions options;
    options.scale = 0.7;
    both(options);
  }
  SECTION("causal") {
    accel::nn::AttentionOptions options;
    options.is_causal = true;
    both(options);
  }
  SECTION("boolean masks of (L, S), per batch row, per head") {
    both(masked(allowed({l, s})));
    both(masked(allowed({batch, 1, l, s})));
    both(masked(allowed({batch, heads, l, s})));
  }
  SECTION("float masks, constant and with gradients, in every broadcast shape") {
    for (const std::vector<int64_t>& sizes : std::vector<std::vector<int64_t>>{
             {l, s}, {batch, 1, 1, s}, {batch, 1, l, s}, {batch, heads, 1, s}, {batch, heads, l, s}}) {
      INFO("mask of " << at::IntArrayRef(sizes));
      both(masked(at::randn(sizes, at::kDouble)));
      both(masked(at::randn(sizes, at::kDouble).requires_grad_()));
    }
  }
  SECTION("keys and values shared by the batch") {
    compare(q, k[0].unsqueeze(0).detach().requires_grad_(), v[0].unsqueeze(0).detach().requires_grad_(), {});
  }
  SECTION("only some inputs need gradients") {
    compare(q, k.detach(), v.detach(), masked(allowed({batch, 1, l, s})));
    compare(q.detach(), k, v.detach(), masked(at::randn({l, s}, at::kDouble).requires_grad_()));
  }
#if !ACCEL_TORCH_AT_LEAST(2, 0)
  // LibTorch 1.13's softmax over a row of -inf gives NaN, and so do the
  // row's output and the gradients it reaches (all of k's and v's).
  SECTION("a query that sees no key gives NaN, as the plain computation does") {
    at::Tensor mask = allowed({batch, 1, l, s});
    mask[0][0][1].fill_(false);
    const at::Tensor out = accel::nn::scaled_dot_product_attention(q, k, v, masked(mask));
    REQUIRE(out[0][0][1].isnan().all().item<bool>());
    REQUIRE_FALSE(out[0][0][0].isnan().any().item<bool>());
    const auto got = output_and_grads(out, weight, {q, k, v});
    const auto expected = output_and_grads(plain_attention(q, k, v, masked(mask)), weight, {q, k, v});
    for (size_t i = 0; i < got.size(); ++i) {
      REQUIRE(at::allclose(got[i], expected[i], 1e-6, 1e-6, /*equal_nan=*/true));
    }
  }
#endif
}

// With create_graph the recomputing backward records its own history.
TEST_CASE("attention's gradients can be differentiated again") {
  at::manual_seed(4);
  const at::Tensor q = at::randn({2, 2, 4, 3}, at::kDouble).requires_grad_(),
                   k = at::randn({2, 2, 5, 3}, at::kDouble).requires_grad_(),
                   v = at::randn({2, 2, 5, 3}, at::kDouble).requires_grad_(),
                   bias = at::randn({2, 1, 4, 5}, at::kDouble).requires_grad_();
  accel::nn::AttentionOptions options;
  options.attn_mask = bias;
  const auto second = [&](const at::Tensor& out) {
    const auto first = torch::autograd::grad({out.pow(2).sum()}, {q, k, v, bias}, {}, true, true);
    at::Tensor total = first[0].pow(2).sum();
    for (size_t i = 1; i < first.size(); ++i) total = total + first[i].pow(2).sum();
    return torch::autograd::grad({total}, {q, k, v, bias});
  };
  const auto got = second(accel::nn::scaled_dot_product_attention(q, k, v, options));
  const auto expected = second(plain_attention(q, k, v, options));
  for (size_t i = 0; i < got.size(); ++i) REQUIRE(at::allclose(got[i], expected[i], 1e-6, 1e-6));
}

#if !ACCEL_TORCH_AT_LEAST(2, 0)
// What a forward leaves allocated for backward, from the engine's CPU
// allocator: the recomputing path keeps less than the plain one by the
// weights (batch x heads x L x S floats) less its log-sum-exp (a float a
// row), with and without grouped queries, causal or with an additive mask
// shared by the heads (as a Llama's), which it keeps unfolded.
TEST_CASE("attention keeps no weights for backward") {
  accel::install_caching_cpu_allocator();
  const int64_t batch = 1, heads = 4, l = 512, s = 512, e = 16;
  const int64_t weights_bytes = batch * heads * l * s * static_cast<int64_t>(sizeof(float)),
                logsumexp_bytes = batch * heads * l * static_cast<int64_t>(sizeof(float));
  const at::Tensor additive = at::zeros({1, 1, l, s}).masked_fill_(at::ones({l, s}, at::kBool).triu(1), -1e9);
  for (const bool causal : {true, false}) {
    for (const int64_t kv_heads : {heads, heads / 2}) {
      INFO(kv_heads << " key/value heads, " << (causal ? "is_causal" : "an additive mask"));
      const at::Tensor q = at::randn({batch, heads, l, e}).requires_grad_(),
                       k = at::randn({batch, kv_heads, s, e}).requires_grad_(),
                       v = at::randn({batch, kv_heads, s, e}).requires_grad_();
      accel::nn::AttentionOptions options;
      options.is_causal = causal;
      if (!causal) options.attn_mask = additive;
      options.enable_gqa = kv_heads != heads;
      const auto kept = [&](const std::function<at::Tensor()>& forward) {
        const int64_t before = accel::cpu_memory_stats().allocated;
        const at::Tensor out = forward();  // holds the graph, and what it saved
        return accel::cpu_memory_stats().allocated - before;
      };
      const int64_t recomputing = kept([&] { return accel::nn::scaled_dot_product_attention(q, k, v, options); });
      const int64_t plain = kept([&] { return plain_attention(q, k, v, options); });
      INFO("kept after forward: " << recomputing << " bytes recomputing, " << plain << " plain");
      REQUIRE(plain - recomputing >= weights_bytes - logsumexp_bytes);
    }
  }
}
#endif
