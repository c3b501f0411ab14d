#include "engine/loss_scaler.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace accel {

DynamicLossScaler::DynamicLossScaler(Options options)
    : options_(options), scale_(options.init_scale) {
  TORCH_CHECK(options.init_scale > 0, "loss scaler: init_scale must be positive, got ",
              options.init_scale);
  TORCH_CHECK(options.growth_factor > 1, "loss scaler: growth_factor must be above 1, got ",
              options.growth_factor);
  TORCH_CHECK(options.backoff_factor > 0 && options.backoff_factor < 1,
              "loss scaler: backoff_factor must be in (0, 1), got ", options.backoff_factor);
  TORCH_CHECK(options.growth_interval >= 1, "loss scaler: growth_interval must be at least 1, got ",
              options.growth_interval);
}

bool DynamicLossScaler::unscale(const std::vector<at::Tensor>& params) const {
  at::NoGradGuard no_grad;
  // Host gradients: the sum of a tensor holding inf or NaN is inf or NaN,
  // so one reduction per gradient and one check at the end find any
  // overflow. CUDA gradients: LibTorch's fused kernel divides and checks a
  // whole group in one launch, per device and dtype as PyTorch's GradScaler
  // groups them (the kernel needs one of each).
  std::vector<at::Tensor> sums;
  struct CudaGroup {
    c10::Device device;
    at::ScalarType dtype;
    std::vector<at::Tensor> grads;
  };
  std::vector<CudaGroup> groups;
  for (const at::Tensor& p : params) {
    const at::Tensor& grad = p.grad();
    if (!grad.defined()) continue;
    if (!grad.is_cuda()) {
      const_cast<at::Tensor&>(grad).mul_(1.0 / scale_);
      sums.push_back(grad.sum().to(at::kFloat));
      continue;
    }
    auto group = std::find_if(groups.begin(), groups.end(), [&](const CudaGroup& g) {
      return g.device == grad.device() && g.dtype == grad.scalar_type();
    });
    if (group == groups.end()) group = groups.insert(groups.end(), {grad.device(), grad.scalar_type(), {}});
    group->grads.push_back(grad);
  }
  bool found_inf = !sums.empty() && !at::stack(sums).sum().isfinite().item<bool>();
  for (CudaGroup& group : groups) {
    at::Tensor found = at::zeros({1}, at::TensorOptions().dtype(at::kFloat).device(group.device));
    at::Tensor inv_scale = at::full({1}, 1.0 / scale_, found.options());
    at::_amp_foreach_non_finite_check_and_unscale_(group.grads, found, inv_scale);
    found_inf = found.item<float>() > 0 || found_inf;
  }
  return found_inf;
}

void DynamicLossScaler::update(bool found_inf) {
  if (found_inf) {
    scale_ *= options_.backoff_factor;
    growth_tracker_ = 0;
    return;
  }
  if (++growth_tracker_ == options_.growth_interval) {
    scale_ *= options_.growth_factor;
    growth_tracker_ = 0;
  }
}

void DynamicLossScaler::load(double scale, int64_t growth_tracker) {
  TORCH_CHECK(scale > 0, "loss scaler: a saved scale must be positive, got ", scale);
  TORCH_CHECK(growth_tracker >= 0 && growth_tracker < options_.growth_interval,
              "loss scaler: saved growth tracker ", growth_tracker, " is outside [0, ",
              options_.growth_interval, ")");
  scale_ = scale;
  growth_tracker_ = growth_tracker;
}

}  // namespace accel
