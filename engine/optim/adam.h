// Adam and AdamW, as PyTorch 1.13's _single_tensor_adam / _single_tensor_adamw,
// with the same arithmetic on multi-tensor kernels (foreach), and LibTorch
// 2's _fused_adam_ / _fused_adamw_ (fused).
#pragma once
#include "engine/optim/optimizer.h"

namespace accel::optim {

// Options (PyTorch's names and defaults; PyTorch's `betas` pair is beta1, beta2):
//   lr            1e-3, >= 0
//   beta1, beta2  0.9, 0.999, each in [0, 1)
//   eps           1e-8, >= 0
//   weight_decay  0 (Adam: L2 penalty added to the gradient), >= 0
//   amsgrad       flag, 0; normalise by the running maximum of exp_avg_sq
//   maximize      flag, 0; ascend instead of descend
// State per parameter: step (0-dim float32 counter, as PyTorch keeps it), exp_avg,
// exp_avg_sq, and max_exp_avg_sq when amsgrad is on. Turning amsgrad on for a group
// that already has state starts its max_exp_avg_sq at zero.
// Complex parameters are rejected.
class Adam : public Optimizer {
 public:
  explicit Adam(std::vector<at::Tensor> params, const OptionMap& options = {});
  // Per-group options override `options`, which override the defaults above.
  explicit Adam(std::vector<ParamGroup> groups, const OptionMap& options = {});

  void refresh_device_options() override;

 protected:
  // decoupled: AdamW's weight decay, applied to the parameter (param *= 1 - lr * wd)
  // before the Adam update instead of being added to the gradient.
  Adam(std::string name, bool decoupled, double default_weight_decay,
       std::vector<ParamGroup> groups, const OptionMap& options);

  void step_group(const ParamGroup& group, std::vector<ParamState>& states,
                  Implementation how) override;
  bool has_implementation(Implementation how) const override;
  void check_options(const OptionMap& options) const override;
  std::vector<std::size_t> required_slots(const OptionMap& options) const override;

 private:
  bool decoupled_;
  // Fused: each group's learning rate as a float32 tensor on its parameters'
  // device, which the kernels read. A step fills it from the group's option
  // first, except inside a CUDA graph's capture, whose replays read what
  // refresh_device_options() put there. Eager and replayed steps so compute
  // the same values.
  std::vector<at::Tensor> device_lrs_;  // [group], undefined until needed

  struct Hyper {
    double lr, beta1, beta2, eps, weight_decay;
    bool amsgrad, maximize;
  };
  // The parameters of a group that have a gradient, and their state.
  struct Stepped {
    std::vector<at::Tensor> params, grads;
    std::vector<ParamState*> states;
  };
  Stepped stepped(const ParamGroup& group, std::vector<ParamState>& states, bool amsgrad) const;
  void step_foreach(const Stepped& s, const Hyper& h);
  void step_fused(std::size_t group, const Stepped& s, const Hyper& h);
};

// Adam with decoupled weight decay; same options, but weight_decay defaults to 1e-2.
class AdamW : public Adam {
 public:
  explicit AdamW(std::vector<at::Tensor> params, const OptionMap& options = {});
  explicit AdamW(std::vector<ParamGroup> groups, const OptionMap& options = {});
};

}  // namespace accel::optim
