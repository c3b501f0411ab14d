// RMSprop, as PyTorch 1.13's RMSprop (_single_tensor_rmsprop).
#pragma once
#include "engine/optim/optimizer.h"

namespace accel::optim {

// Options (PyTorch's names and defaults):
//   lr            1e-2, >= 0
//   alpha         0.99, >= 0; smoothing constant of the squared-gradient average
//   eps           1e-8, >= 0; added to the root of the average
//   weight_decay  0, >= 0 (L2 penalty added to the gradient)
//   momentum      0, >= 0
//   centered      flag, 0; normalise by an estimate of the gradient's variance
//   maximize      flag, 0; ascend instead of descend
// State per parameter: step (0-dim float32 counter; the math does not use it),
// square_avg, momentum_buffer when momentum > 0 and grad_avg when centered. Turning
// momentum or centered on for a parameter that already has state starts the new
// slot at zero, where PyTorch would fail. Complex parameters are rejected.
class RMSprop : public Optimizer {
 public:
  explicit RMSprop(std::vector<at::Tensor> params, const OptionMap& options = {});
  // Per-group options override `options`, which override the defaults above.
  explicit RMSprop(std::vector<ParamGroup> groups, const OptionMap& options = {});

 protected:
  void step_group(const ParamGroup& group, std::vector<ParamState>& states,
                  Implementation how) override;
  void check_options(const OptionMap& options) const override;
  std::vector<std::size_t> required_slots(const OptionMap& options) const override;
};

}  // namespace accel::optim
