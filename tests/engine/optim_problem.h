// The optimizer tests' shared problem: two parameters whose gradients pull
// them towards fixed targets, stepped exactly as this PyTorch 1.13 harness
// does (every expected parameter list in the tests was printed by it, with
// /usr/bin/python3 and python3-torch 1.13.1; each case's comment gives its
// call):
//
//   import torch
//   O = torch.optim
//   def run(make, steps, before=lambda k, opt: None):
//       p0 = torch.tensor([[0.5, -1.2, 0.3], [2.0, -0.7, 1.1]], requires_grad=True)
//       p1 = torch.tensor([0.1, -0.4, 0.9, 1.5], requires_grad=True)
//       t0 = torch.tensor([[0.2, 0.1, -0.3], [1.0, 0.4, -0.5]])
//       t1 = torch.tensor([0.3, 0.2, -0.1, 0.7])
//       opt = make(p0, p1)
//       for k in range(steps):
//           for p, t in ((p0, t0), (p1, t1)):
//               p.grad = (p.detach() - t).mul(2).add(0.1 * k)
//           before(k, opt)
//           opt.step()
//       flat = torch.cat([p0.detach().flatten(), p1.detach().flatten()]).tolist()
//       print('{' + ', '.join('%.9g' % v for v in flat) + '}')
#pragma once
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "engine/optim/optimizer.h"

namespace accel::optim::testing {

// The harness's two parameters and the targets their gradients pull towards.
struct Problem {
  at::Tensor p0 = at::tensor({0.5f, -1.2f, 0.3f, 2.0f, -0.7f, 1.1f}).view({2, 3});
  at::Tensor p1 = at::tensor({0.1f, -0.4f, 0.9f, 1.5f});
  at::Tensor t0 = at::tensor({0.2f, 0.1f, -0.3f, 1.0f, 0.4f, -0.5f}).view({2, 3});
  at::Tensor t1 = at::tensor({0.3f, 0.2f, -0.1f, 0.7f});

  Problem() {
    p0.set_requires_grad(true);
    p1.set_requires_grad(true);
  }

  // An independent copy of the current parameters, for a second optimizer.
  Problem copy() const {
    Problem other;
    at::NoGradGuard no_grad;
    other.p0.copy_(p0);
    other.p1.copy_(p1);
    return other;
  }

  std::vector<at::Tensor> params() const { return {p0, p1}; }

  // Steps k = first .. first + count - 1 of the harness's loop.
  void run(Optimizer& opt, int first, int count,
           const std::function<void(int, Optimizer&)>& before = {}) {
    for (int k = first; k < first + count; ++k) {
      p0.mutable_grad() = (p0.detach() - t0).mul(2).add(0.1 * k);
      p1.mutable_grad() = (p1.detach() - t1).mul(2).add(0.1 * k);
      if (before) before(k, opt);
      opt.step();
    }
  }

  std::vector<float> flat() const {
    at::Tensor all = at::cat({p0.detach().flatten(), p1.detach().flatten()});
    return std::vector<float>(all.data_ptr<float>(), all.data_ptr<float>() + all.numel());
  }
};

inline void check_params(const Problem& problem, const std::vector<float>& expected) {
  const std::vector<float> actual = problem.flat();
  REQUIRE(actual.size() == expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) {
    CAPTURE(i);
    // Relative 1e-6, or float32 rounding of the parameters' magnitude (about
    // 1) for a value near zero, which comes out of a cancellation: LibTorch
    // 2.x's vectorised kernels round such steps differently from 1.13's.
    CHECK(actual[i] == Approx(expected[i]).epsilon(1e-6).margin(2e-7));
  }
}

inline std::vector<std::string> keys(const StateDict& dict) {
  std::vector<std::string> out;
  for (const auto& [k, t] : dict) out.push_back(k);
  return out;
}

}  // namespace accel::optim::testing
