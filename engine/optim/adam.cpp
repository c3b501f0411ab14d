#include "engine/optim/adam.h"

#include <cmath>

namespace accel::optim {

namespace {

constexpr std::size_t kStep = 0;
constexpr std::size_t kExpAvg = 1;
constexpr std::size_t kExpAvgSq = 2;
constexpr std::size_t kMaxExpAvgSq = 3;

std::vector<OptionSpec> adam_specs(double default_weight_decay) {
  return {{"lr", 1e-3},
          {"beta1", 0.9},
          {"beta2", 0.999},
          {"eps", 1e-8},
          {"weight_decay", default_weight_decay},
          {"amsgrad", 0.0, OptionKind::Flag},
          {"maximize", 0.0, OptionKind::Flag}};
}

std::vector<ParamGroup> single_group(std::vector<at::Tensor> params) {
  return {ParamGroup{std::move(params), {}}};
}

}  // namespace

Adam::Adam(std::vector<at::Tensor> params, const OptionMap& options)
    : Adam("Adam", false, 0.0, single_group(std::move(params)), options) {}

Adam::Adam(std::vector<ParamGroup> groups, const OptionMap& options)
    : Adam("Adam", false, 0.0, std::move(groups), options) {}

Adam::Adam(std::string name, bool decoupled, double default_weight_decay,
           std::vector<ParamGroup> groups, const OptionMap& options)
    : Optimizer(std::move(name), adam_specs(default_weight_decay),
                {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"}, options),
      decoupled_(decoupled) {
  check_options(defaults());
  add_initial_groups(std::move(groups));
}

AdamW::AdamW(std::vector<at::Tensor> params, const OptionMap& options)
    : Adam("AdamW", true, 1e-2, single_group(std::move(params)), options) {}

AdamW::AdamW(std::vector<ParamGroup> groups, const OptionMap& options)
    : Adam("AdamW", true, 1e-2, std::move(groups), options) {}

void Adam::step_group(const ParamGroup& group, std::vector<ParamState>& states) {
  const double lr = get(group.options, "lr");
  const double beta1 = get(group.options, "beta1");
  const double beta2 = get(group.options, "beta2");
  const double eps = get(group.options, "eps");
  const double weight_decay = get(group.options, "weight_decay");
  const bool amsgrad = get(group.options, "amsgrad") != 0.0;
  const bool maximize = get(group.options, "maximize") != 0.0;

  for (std::size_t j = 0; j < group.params.size(); ++j) {
    const at::Tensor& param = group.params[j];
    const at::Tensor& param_grad = param.grad();
    if (!param_grad.defined()) continue;
    TORCH_CHECK(!param_grad.is_sparse(), name(), " does not support sparse gradients");
    TORCH_CHECK(!param.is_complex(), name(), " does not support complex parameters");

    ParamState& state = states[j];
    if (!state[kStep].defined()) {
      state[kStep] = at::zeros({}, at::kFloat);
      state[kExpAvg] = at::zeros_like(param, at::MemoryFormat::Preserve);
      state[kExpAvgSq] = at::zeros_like(param, at::MemoryFormat::Preserve);
    }
    if (amsgrad && !state[kMaxExpAvgSq].defined())
      state[kMaxExpAvgSq] = at::zeros_like(param, at::MemoryFormat::Preserve);
    at::Tensor& exp_avg = state[kExpAvg];
    at::Tensor& exp_avg_sq = state[kExpAvgSq];

    // The counter is float32 as in PyTorch (it stops growing at 2^24 there too);
    // bumping it through its pointer saves an operator dispatch per parameter.
    float& step = *state[kStep].data_ptr<float>();
    step += 1.0f;

    at::Tensor grad = maximize ? param_grad.neg() : param_grad;
    if (decoupled_) {
      // x * 1 is exact, so skipping a zero decay cannot change the result.
      if (weight_decay != 0.0) param.mul_(1.0 - lr * weight_decay);
    } else if (weight_decay != 0.0) {
      grad = grad.add(param, weight_decay);
    }

    exp_avg.mul_(beta1).add_(grad, 1.0 - beta1);
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1.0 - beta2);

    const double bias_correction1 = 1.0 - std::pow(beta1, static_cast<double>(step));
    const double bias_correction2 = 1.0 - std::pow(beta2, static_cast<double>(step));
    const double step_size = lr / bias_correction1;
    const double bias_correction2_sqrt = std::sqrt(bias_correction2);

    // One temporary per parameter (PyTorch's expression makes two); the in-place
    // division runs the same kernel, so the values are identical.
    at::Tensor denom;
    if (amsgrad) {
      at::Tensor& max_exp_avg_sq = state[kMaxExpAvgSq];
      at::maximum_out(max_exp_avg_sq, max_exp_avg_sq, exp_avg_sq);
      denom = max_exp_avg_sq.sqrt().div_(bias_correction2_sqrt).add_(eps);
    } else {
      denom = exp_avg_sq.sqrt().div_(bias_correction2_sqrt).add_(eps);
    }
    param.addcdiv_(exp_avg, denom, -step_size);
  }
}

void Adam::check_options(const OptionMap& options) const {
  const double lr = get(options, "lr");
  const double beta1 = get(options, "beta1");
  const double beta2 = get(options, "beta2");
  const double eps = get(options, "eps");
  const double weight_decay = get(options, "weight_decay");
  TORCH_CHECK(lr >= 0.0, name(), ": invalid lr ", lr, " (must be >= 0)");
  TORCH_CHECK(eps >= 0.0, name(), ": invalid eps ", eps, " (must be >= 0)");
  TORCH_CHECK(beta1 >= 0.0 && beta1 < 1.0, name(), ": invalid beta1 ", beta1,
              " (must be in [0, 1))");
  TORCH_CHECK(beta2 >= 0.0 && beta2 < 1.0, name(), ": invalid beta2 ", beta2,
              " (must be in [0, 1))");
  TORCH_CHECK(weight_decay >= 0.0, name(), ": invalid weight_decay ", weight_decay,
              " (must be >= 0)");
}

std::vector<std::size_t> Adam::required_slots(const OptionMap&) const {
  // Not max_exp_avg_sq: a group whose amsgrad was turned on after its last step has
  // none yet, and step() starts it at zero.
  return {kStep, kExpAvg, kExpAvgSq};
}

}  // namespace accel::optim
