// The fp16 loss scaler's rule and gradient clipping, on real tensors.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "engine/grad_clipping.h"
#include "engine/loss_scaler.h"

namespace {

at::Tensor param_with_grad(std::vector<double> grad) {
  at::Tensor p = at::zeros({static_cast<int64_t>(grad.size())}, at::kDouble).requires_grad_();
  p.mutable_grad() = at::tensor(grad, at::kDouble);
  return p;
}

}  // namespace

TEST_CASE("unscale divides gradients and finds inf and NaN") {
  accel::DynamicLossScaler scaler({8.0, 2.0, 0.5, 3});
  auto p = param_with_grad({8.0, 16.0});
  REQUIRE_FALSE(scaler.unscale({p}));
  REQUIRE(p.grad().equal(at::tensor({1.0, 2.0}, at::kDouble)));

  auto inf = param_with_grad({1.0, std::numeric_limits<double>::infinity()});
  REQUIRE(scaler.unscale({p, inf}));
  auto nan = param_with_grad({std::nan("")});
  REQUIRE(scaler.unscale({nan}));
  auto no_grad = at::zeros({2}).requires_grad_();
  REQUIRE_FALSE(scaler.unscale({no_grad}));
}

TEST_CASE("the scale backs off on overflow and grows after growth_interval good steps") {
  accel::DynamicLossScaler scaler({1024.0, 2.0, 0.5, 3});
  const bool plan[] = {false, false, true, false, false, false, true};
  const double expected[] = {1024, 1024, 512, 512, 512, 1024, 512};
  for (size_t i = 0; i < 7; ++i) {
    scaler.update(plan[i]);
    INFO("after step " << i + 1);
    REQUIRE(scaler.scale() == expected[i]);
  }
  REQUIRE(scaler.growth_tracker() == 0);
  scaler.update(false);
  REQUIRE(scaler.growth_tracker() == 1);
  scaler.load(64.0, 2);
  scaler.update(false);
  REQUIRE(scaler.scale() == 128.0);
  REQUIRE_THROWS_WITH(scaler.load(-1.0, 0), Catch::Contains("positive"));
  REQUIRE_THROWS_WITH(accel::DynamicLossScaler({1.0, 0.5, 0.5, 1}), Catch::Contains("growth_factor"));
}

TEST_CASE("clip_grad_norm scales to max_norm and returns the norm before clipping") {
  auto a = param_with_grad({3.0, 0.0});
  auto b = param_with_grad({0.0, 4.0});
  at::Tensor norm = accel::clip_grad_norm({a, b}, 1.0);
  REQUIRE(norm.item<double>() == Approx(5.0));
  double after = std::sqrt(a.grad().pow(2).sum().item<double>() + b.grad().pow(2).sum().item<double>());
  REQUIRE(after == Approx(1.0).epsilon(1e-5));
  auto small = param_with_grad({0.1});
  accel::clip_grad_norm({small}, 1.0);
  REQUIRE(small.grad().item<double>() == Approx(0.1));  // under the limit: untouched

  auto c = param_with_grad({-3.0, 0.5, 2.0});
  accel::clip_grad_value({c}, 1.0);
  REQUIRE(c.grad().equal(at::tensor({-1.0, 0.5, 1.0}, at::kDouble)));
}
