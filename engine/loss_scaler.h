// Dynamic loss scaling for fp16 training. LibTorch's C++ API has no
// GradScaler, so the engine carries its own (on the GPU it unscales with
// LibTorch's fused CUDA kernel, as GradScaler does), with the same rule: multiply
// the loss by `scale`; before the optimizer step divide the gradients by it
// and look for inf/NaN; on overflow skip the step and multiply the scale by
// `backoff_factor`; after `growth_interval` good steps in a row multiply it
// by `growth_factor`. The scale lives on the host: the step must read the
// overflow flag there anyway to skip or take the step (GradScaler reads it
// too), so updating it there costs no extra synchronisation.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace accel {

class DynamicLossScaler {
 public:
  struct Options {
    double init_scale = 65536.0;
    double growth_factor = 2.0;
    double backoff_factor = 0.5;
    int64_t growth_interval = 2000;
  };

  explicit DynamicLossScaler(Options options);

  double scale() const { return scale_; }
  int64_t growth_tracker() const { return growth_tracker_; }
  const Options& options() const { return options_; }

  // Divides every defined gradient of `params` by the scale. Returns whether
  // any gradient holds an inf or NaN.
  bool unscale(const std::vector<at::Tensor>& params) const;

  // Records the outcome of one step attempt and adjusts the scale.
  void update(bool found_inf);

  // Restores a saved state (checkpoints); the scale must be positive.
  void load(double scale, int64_t growth_tracker);

 private:
  Options options_;
  double scale_;
  int64_t growth_tracker_ = 0;
};

}  // namespace accel
