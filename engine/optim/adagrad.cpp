#include "engine/optim/adagrad.h"

namespace accel::optim {

namespace {

constexpr std::size_t kStep = 0;
constexpr std::size_t kSum = 1;

std::vector<OptionSpec> adagrad_specs() {
  return {{"lr", 1e-2},
          {"lr_decay", 0.0},
          {"weight_decay", 0.0},
          {"initial_accumulator_value", 0.0},
          {"eps", 1e-10},
          {"maximize", 0.0, OptionKind::Flag}};
}

}  // namespace

Adagrad::Adagrad(std::vector<at::Tensor> params, const OptionMap& options)
    : Adagrad(std::vector<ParamGroup>{ParamGroup{std::move(params), {}}}, options) {}

Adagrad::Adagrad(std::vector<ParamGroup> groups, const OptionMap& options)
    : Optimizer("Adagrad", adagrad_specs(), {"step", "sum"}, options) {
  check_options(defaults());
  add_initial_groups(std::move(groups));
}

void Adagrad::step_group(const ParamGroup& group, std::vector<ParamState>& states, Implementation) {
  const double lr = get(group.options, "lr");
  const double lr_decay = get(group.options, "lr_decay");
  const double weight_decay = get(group.options, "weight_decay");
  const double initial = get(group.options, "initial_accumulator_value");
  const double eps = get(group.options, "eps");
  const bool maximize = get(group.options, "maximize") != 0.0;

  for (std::size_t j = 0; j < group.params.size(); ++j) {
    const at::Tensor& param = group.params[j];
    const at::Tensor& param_grad = param.grad();
    if (!param_grad.defined()) continue;
    TORCH_CHECK(!param_grad.is_sparse(), "Adagrad does not support sparse gradients");
    TORCH_CHECK(!param.is_complex(), "Adagrad does not support complex parameters");

    ParamState& state = states[j];
    if (!state[kStep].defined()) {
      state[kStep] = at::zeros({}, at::kFloat);
      state[kSum] = at::full_like(param, initial, at::MemoryFormat::Preserve);
    }
    // float32 counting, as PyTorch's step tensor.
    float& step = *state[kStep].data_ptr<float>();
    step += 1.0f;

    at::Tensor grad = maximize ? param_grad.neg() : param_grad;
    if (weight_decay != 0.0) grad = grad.add(param, weight_decay);
    const double clr = lr / (1.0 + (static_cast<double>(step) - 1.0) * lr_decay);

    at::Tensor& sum = state[kSum];
    sum.addcmul_(grad, grad, 1.0);
    at::Tensor std = sum.sqrt().add_(eps);
    param.addcdiv_(grad, std, -clr);
  }
}

void Adagrad::check_options(const OptionMap& options) const {
  for (const char* option : {"lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps"}) {
    const double value = get(options, option);
    TORCH_CHECK(value >= 0.0, "Adagrad: invalid ", option, " ", value, " (must be >= 0)");
  }
}

std::vector<std::size_t> Adagrad::required_slots(const OptionMap&) const { return {kStep, kSum}; }

}  // namespace accel::optim
