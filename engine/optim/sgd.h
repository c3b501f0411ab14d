// Stochastic gradient descent with momentum, as PyTorch 1.13's SGD
// (_single_tensor_sgd), also on multi-tensor kernels (foreach).
#pragma once
#include "engine/optim/optimizer.h"

namespace accel::optim {

// Options (PyTorch's names and defaults):
//   lr            required, >= 0
//   momentum      0, >= 0
//   dampening     0
//   weight_decay  0, >= 0 (L2 penalty added to the gradient)
//   nesterov      flag, 0; needs momentum > 0 and dampening 0
//   maximize      flag, 0; ascend instead of descend
// State: momentum_buffer, created on a parameter's first step as a copy of its
// (decayed) gradient, and only when momentum is non-zero.
class SGD : public Optimizer {
 public:
  explicit SGD(std::vector<at::Tensor> params, const OptionMap& options = {});
  // Per-group options override `options`, which override the defaults above.
  explicit SGD(std::vector<ParamGroup> groups, const OptionMap& options = {});

 protected:
  void step_group(const ParamGroup& group, std::vector<ParamState>& states,
                  Implementation how) override;
  void check_options(const OptionMap& options) const override;
  bool has_implementation(Implementation how) const override;
  std::vector<std::size_t> required_slots(const OptionMap& options) const override;

 private:
  struct Hyper {
    double lr, momentum, dampening, weight_decay;
    bool nesterov, maximize;
  };
  static Hyper hyper(const ParamGroup& group);
  void step_foreach(const ParamGroup& group, std::vector<ParamState>& states, const Hyper& h);
};

}  // namespace accel::optim
