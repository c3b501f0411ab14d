#include "engine/optim/sgd.h"

namespace accel::optim {

namespace {

constexpr std::size_t kMomentumBuffer = 0;

std::vector<OptionSpec> sgd_specs() {
  return {{"lr", std::nullopt},
          {"momentum", 0.0},
          {"dampening", 0.0},
          {"weight_decay", 0.0},
          {"nesterov", 0.0, OptionKind::Flag},
          {"maximize", 0.0, OptionKind::Flag}};
}

}  // namespace

SGD::SGD(std::vector<at::Tensor> params, const OptionMap& options)
    : SGD(std::vector<ParamGroup>{ParamGroup{std::move(params), {}}}, options) {}

SGD::SGD(std::vector<ParamGroup> groups, const OptionMap& options)
    : Optimizer("SGD", sgd_specs(), {"momentum_buffer"}, options) {
  check_options(defaults());
  add_initial_groups(std::move(groups));
}

void SGD::step_group(const ParamGroup& group, std::vector<ParamState>& states) {
  const double lr = get(group.options, "lr");
  const double momentum = get(group.options, "momentum");
  const double dampening = get(group.options, "dampening");
  const double weight_decay = get(group.options, "weight_decay");
  const bool nesterov = get(group.options, "nesterov") != 0.0;
  const bool maximize = get(group.options, "maximize") != 0.0;

  for (std::size_t j = 0; j < group.params.size(); ++j) {
    const at::Tensor& param = group.params[j];
    const at::Tensor& grad = param.grad();
    if (!grad.defined()) continue;

    at::Tensor d_p = maximize ? grad.neg() : grad;
    if (weight_decay != 0.0) d_p = d_p.add(param, weight_decay);
    if (momentum != 0.0) {
      at::Tensor& buf = states[j][kMomentumBuffer];
      if (!buf.defined()) {
        buf = d_p.clone();
      } else {
        buf.mul_(momentum).add_(d_p, 1.0 - dampening);
      }
      d_p = nesterov ? d_p.add(buf, momentum) : buf;
    }
    param.add_(d_p, -lr);
  }
}

void SGD::check_options(const OptionMap& options) const {
  const double lr = get(options, "lr");
  const double momentum = get(options, "momentum");
  const double weight_decay = get(options, "weight_decay");
  TORCH_CHECK(lr >= 0.0, "SGD: invalid lr ", lr, " (must be >= 0)");
  TORCH_CHECK(momentum >= 0.0, "SGD: invalid momentum ", momentum, " (must be >= 0)");
  TORCH_CHECK(weight_decay >= 0.0, "SGD: invalid weight_decay ", weight_decay, " (must be >= 0)");
  TORCH_CHECK(
      get(options, "nesterov") == 0.0 || (momentum > 0.0 && get(options, "dampening") == 0.0),
      "SGD: nesterov needs momentum > 0 and dampening 0, got momentum ", momentum,
      " and dampening ", get(options, "dampening"));
}

std::vector<std::size_t> SGD::required_slots(const OptionMap& options) const {
  if (get(options, "momentum") != 0.0) return {kMomentumBuffer};
  return {};
}

}  // namespace accel::optim
