// Adagrad, as PyTorch 1.13's Adagrad (_single_tensor_adagrad, dense gradients).
#pragma once
#include "engine/optim/optimizer.h"

namespace accel::optim {

// Options (PyTorch's names and defaults):
//   lr                         1e-2, >= 0
//   lr_decay                   0, >= 0; the step size is lr / (1 + (step - 1) * lr_decay)
//   weight_decay               0, >= 0 (L2 penalty added to the gradient)
//   initial_accumulator_value  0, >= 0; where the sum of squared gradients starts
//   eps                        1e-10, >= 0
//   maximize                   flag, 0; ascend instead of descend
// State per parameter: step (0-dim float32 counter, as PyTorch keeps it) and sum.
// PyTorch makes the state when the optimizer is made; here it is made at a
// parameter's first step, from the group's initial_accumulator_value at that time,
// which gives the same numbers unless that option changes in between.
// Sparse gradients and complex parameters are rejected.
class Adagrad : public Optimizer {
 public:
  explicit Adagrad(std::vector<at::Tensor> params, const OptionMap& options = {});
  // Per-group options override `options`, which override the defaults above.
  explicit Adagrad(std::vector<ParamGroup> groups, const OptionMap& options = {});

 protected:
  void step_group(const ParamGroup& group, std::vector<ParamState>& states,
                  Implementation how) override;
  void check_options(const OptionMap& options) const override;
  std::vector<std::size_t> required_slots(const OptionMap& options) const override;
};

}  // namespace accel::optim
