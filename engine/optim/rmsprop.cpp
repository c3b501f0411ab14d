#include "engine/optim/rmsprop.h"

namespace accel::optim {

namespace {

constexpr std::size_t kStep = 0;
constexpr std::size_t kSquareAvg = 1;
constexpr std::size_t kMomentumBuffer = 2;
constexpr std::size_t kGradAvg = 3;

std::vector<OptionSpec> rmsprop_specs() {
  return {{"lr", 1e-2},
          {"alpha", 0.99},
          {"eps", 1e-8},
          {"weight_decay", 0.0},
          {"momentum", 0.0},
          {"centered", 0.0, OptionKind::Flag},
          {"maximize", 0.0, OptionKind::Flag}};
}

}  // namespace

RMSprop::RMSprop(std::vector<at::Tensor> params, const OptionMap& options)
    : RMSprop(std::vector<ParamGroup>{ParamGroup{std::move(params), {}}}, options) {}

RMSprop::RMSprop(std::vector<ParamGroup> groups, const OptionMap& options)
    : Optimizer("RMSprop", rmsprop_specs(), {"step", "square_avg", "momentum_buffer", "grad_avg"},
                options) {
  check_options(defaults());
  add_initial_groups(std::move(groups));
}

void RMSprop::step_group(const ParamGroup& group, std::vector<ParamState>& states, Implementation) {
  const double lr = get(group.options, "lr");
  const double alpha = get(group.options, "alpha");
  const double eps = get(group.options, "eps");
  const double weight_decay = get(group.options, "weight_decay");
  const double momentum = get(group.options, "momentum");
  const bool centered = get(group.options, "centered") != 0.0;
  const bool maximize = get(group.options, "maximize") != 0.0;

  for (std::size_t j = 0; j < group.params.size(); ++j) {
    const at::Tensor& param = group.params[j];
    const at::Tensor& param_grad = param.grad();
    if (!param_grad.defined()) continue;
    TORCH_CHECK(!param_grad.is_sparse(), "RMSprop does not support sparse gradients");
    TORCH_CHECK(!param.is_complex(), "RMSprop does not support complex parameters");

    ParamState& state = states[j];
    if (!state[kStep].defined()) {
      state[kStep] = at::zeros({}, at::kFloat);
      state[kSquareAvg] = at::zeros_like(param, at::MemoryFormat::Preserve);
    }
    if (momentum > 0.0 && !state[kMomentumBuffer].defined())
      state[kMomentumBuffer] = at::zeros_like(param, at::MemoryFormat::Preserve);
    if (centered && !state[kGradAvg].defined())
      state[kGradAvg] = at::zeros_like(param, at::MemoryFormat::Preserve);
    *state[kStep].data_ptr<float>() += 1.0f;

    at::Tensor grad = maximize ? param_grad.neg() : param_grad;
    if (weight_decay != 0.0) grad = grad.add(param, weight_decay);

    at::Tensor& square_avg = state[kSquareAvg];
    square_avg.mul_(alpha).addcmul_(grad, grad, 1.0 - alpha);
    at::Tensor avg;
    if (centered) {
      at::Tensor& grad_avg = state[kGradAvg];
      grad_avg.mul_(alpha).add_(grad, 1.0 - alpha);
      avg = square_avg.addcmul(grad_avg, grad_avg, -1.0).sqrt_();
    } else {
      avg = square_avg.sqrt();
    }
    avg.add_(eps);

    if (momentum > 0.0) {
      at::Tensor& buf = state[kMomentumBuffer];
      buf.mul_(momentum).addcdiv_(grad, avg);
      param.add_(buf, -lr);
    } else {
      param.addcdiv_(grad, avg, -lr);
    }
  }
}

void RMSprop::check_options(const OptionMap& options) const {
  for (const char* option : {"lr", "alpha", "eps", "weight_decay", "momentum"}) {
    const double value = get(options, option);
    TORCH_CHECK(value >= 0.0, "RMSprop: invalid ", option, " ", value, " (must be >= 0)");
  }
}

std::vector<std::size_t> RMSprop::required_slots(const OptionMap&) const {
  // Not momentum_buffer or grad_avg: a group whose momentum or centered was turned
  // on after its last step has none yet, and step() starts them at zero.
  return {kStep, kSquareAvg};
}

}  // namespace accel::optim
