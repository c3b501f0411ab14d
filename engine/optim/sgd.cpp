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

SGD::Hyper SGD::hyper(const ParamGroup& group) {
  return {get(group.options, "lr"),           get(group.options, "momentum"),
          get(group.options, "dampening"),    get(group.options, "weight_decay"),
          get(group.options, "nesterov") != 0.0, get(group.options, "maximize") != 0.0};
}

void SGD::step_group(const ParamGroup& group, std::vector<ParamState>& states, Implementation how) {
  const Hyper h = hyper(group);
  if (how == Implementation::Foreach) return step_foreach(group, states, h);
  const auto [lr, momentum, dampening, weight_decay, nesterov, maximize] = h;

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

// The for-loop's operations on whole lists, so the values are the same. A
// momentum buffer is made per parameter on its first step, as there.
void SGD::step_foreach(const ParamGroup& group, std::vector<ParamState>& states, const Hyper& h) {
  const auto [lr, momentum, dampening, weight_decay, nesterov, maximize] = h;

  std::vector<at::Tensor> params, grads;
  std::vector<std::size_t> index;
  for (std::size_t j = 0; j < group.params.size(); ++j) {
    if (!group.params[j].grad().defined()) continue;
    params.push_back(group.params[j]);
    grads.push_back(group.params[j].grad());
    index.push_back(j);
  }
  if (params.empty()) return;
  std::vector<at::Tensor> d_p = maximize ? at::_foreach_neg(grads) : grads;
  if (weight_decay != 0.0) d_p = at::_foreach_add(d_p, params, weight_decay);
  if (momentum != 0.0) {
    std::vector<at::Tensor> bufs, old_bufs, old_d_p;
    for (std::size_t k = 0; k < params.size(); ++k) {
      at::Tensor& buf = states[index[k]][kMomentumBuffer];
      if (!buf.defined()) {
        buf = d_p[k].clone();
      } else {
        old_bufs.push_back(buf);
        old_d_p.push_back(d_p[k]);
      }
      bufs.push_back(buf);
    }
    if (!old_bufs.empty()) {
      at::_foreach_mul_(old_bufs, momentum);
      at::_foreach_add_(old_bufs, old_d_p, 1.0 - dampening);
    }
    d_p = nesterov ? at::_foreach_add(d_p, bufs, momentum) : bufs;
  }
  at::_foreach_add_(params, d_p, -lr);
}

bool SGD::has_implementation(Implementation how) const {
  return how == Implementation::ForLoop || how == Implementation::Foreach;
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
