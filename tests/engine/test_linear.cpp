// The engine's linear layer (engine/nn/linear.h) against LibTorch's
// at::linear in double precision: outputs and gradients of float32 inputs
// in every layout a recipe passes (rows of any batch shape, one row, a
// transposed or strided weight, no bias), second derivatives through
// create_graph, and autocast left to LibTorch.
#include <catch2/catch.hpp>

#include <ATen/autocast_mode.h>
#include <torch/autograd.h>

#include "engine/nn/linear.h"

namespace {

// accel::nn::linear of float32 tensors against at::linear of the same
// values in double: output and the three gradients within float32's reach.
void check_against_double(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias) {
  std::vector<at::Tensor> inputs = {x, weight};
  if (bias) inputs.push_back(*bias);
  std::vector<at::Tensor> leaves, doubles;
  for (const at::Tensor& t : inputs) {
    leaves.push_back(t.detach().requires_grad_());
    doubles.push_back(t.detach().to(at::kDouble).requires_grad_());
  }
  const c10::optional<at::Tensor> b = bias ? c10::optional<at::Tensor>(leaves[2]) : c10::nullopt;
  const c10::optional<at::Tensor> bd = bias ? c10::optional<at::Tensor>(doubles[2]) : c10::nullopt;
  const at::Tensor out = accel::nn::linear(leaves[0], leaves[1], b);
  const at::Tensor expected = at::linear(doubles[0], doubles[1], bd);
  REQUIRE(out.scalar_type() == at::kFloat);
  REQUIRE(out.sizes() == expected.sizes());
  REQUIRE(at::allclose(out.to(at::kDouble), expected, 1e-5, 1e-5));
  const at::Tensor upstream = at::randn(expected.sizes(), at::kDouble);
  const auto grads = torch::autograd::grad({out}, leaves, {upstream.to(at::kFloat)});
  const auto expected_grads = torch::autograd::grad({expected}, doubles, {upstream});
  for (size_t i = 0; i < grads.size(); ++i) {
    REQUIRE(grads[i].sizes() == inputs[i].sizes());
    REQUIRE(at::allclose(grads[i].to(at::kDouble), expected_grads[i], 1e-4, 1e-4));
  }
}

}  // namespace

TEST_CASE("linear equals LibTorch's, forward and backward, in every layout") {
  at::manual_seed(3);
  const at::Tensor weight = at::randn({7, 5}), bias = at::randn({7});
  SECTION("rows of a batch") { check_against_double(at::randn({2, 3, 5}), weight, bias); }
  SECTION("one row, no bias") { check_against_double(at::randn({1, 5}), weight, c10::nullopt); }
  SECTION("an absent bias given as an undefined tensor, as Lua's nil arrives") {
    const at::Tensor x = at::randn({3, 5});
    const at::Tensor out = accel::nn::linear(x, weight, c10::optional<at::Tensor>(at::Tensor()));
    REQUIRE(at::allclose(out, at::linear(x, weight), 1e-5, 1e-5));
  }
  SECTION("a vector") { check_against_double(at::randn({5}), weight, bias); }
  SECTION("a transposed input") { check_against_double(at::randn({5, 4}).t(), weight, bias); }
  SECTION("a transposed weight") { check_against_double(at::randn({4, 5}), at::randn({5, 7}).t(), bias); }
  SECTION("a weight strided in both dims") {
    check_against_double(at::randn({4, 5}), at::randn({14, 10}).slice(0, 0, 14, 2).slice(1, 0, 10, 2), bias);
  }
  SECTION("large enough for several threads") {
    check_against_double(at::randn({64, 256}), at::randn({300, 256}), at::randn({300}));
  }
}

TEST_CASE("linear keeps second derivatives and leaves autocast to LibTorch") {
  at::manual_seed(4);
  SECTION("create_graph: the gradient of a gradient equals LibTorch's") {
    const at::Tensor x0 = at::randn({3, 4}), w0 = at::randn({2, 4});
    const auto second = [&](auto linear_fn) {
      at::Tensor x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_();
      const at::Tensor gx = torch::autograd::grad({linear_fn(x, w).pow(2).sum()}, {x}, {}, true, true)[0];
      return torch::autograd::grad({gx.pow(2).sum()}, {w})[0];
    };
    const at::Tensor ours = second([](const at::Tensor& x, const at::Tensor& w) { return accel::nn::linear(x, w, {}); });
    const at::Tensor theirs = second([](const at::Tensor& x, const at::Tensor& w) { return at::linear(x, w); });
    REQUIRE(at::allclose(ours, theirs, 1e-5, 1e-5));
  }
  SECTION("under CPU autocast the product is bfloat16, as at::linear's") {
    at::autocast::set_cpu_enabled(true);
    const at::Tensor out = accel::nn::linear(at::randn({3, 4}), at::randn({2, 4}), at::randn({2}));
    at::autocast::set_cpu_enabled(false);
    REQUIRE(out.scalar_type() == at::kBFloat16);
  }
}
