#include "engine/optim/adam.h"

#include <cmath>

#include "engine/compat.h"
#include "engine/cuda_graph.h"

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

namespace {

// The step counter as a host float: the for-loop and foreach paths keep it on
// the CPU (as PyTorch's non-capturable paths do), the fused path on the
// parameter's device; a counter moves when the path changes.
float& host_step(at::Tensor& counter) {
  if (!counter.is_cpu()) counter = counter.cpu();
  return *counter.data_ptr<float>();
}

}  // namespace

// The per-parameter checks and state every path shares: the parameters of
// `group` that have a gradient, with their state created on first use.
Adam::Stepped Adam::stepped(const ParamGroup& group, std::vector<ParamState>& states,
                            bool amsgrad) const {
  Stepped out;
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
    out.params.push_back(param);
    out.grads.push_back(param_grad);
    out.states.push_back(&state);
  }
  return out;
}

void Adam::step_group(const ParamGroup& group, std::vector<ParamState>& states, Implementation how) {
  const Hyper h{get(group.options, "lr"),           get(group.options, "beta1"),
                get(group.options, "beta2"),        get(group.options, "eps"),
                get(group.options, "weight_decay"), get(group.options, "amsgrad") != 0.0,
                get(group.options, "maximize") != 0.0};
  Stepped s = stepped(group, states, h.amsgrad);
  if (s.params.empty()) return;
  if (how == Implementation::Fused) return step_fused(static_cast<std::size_t>(&group - param_groups().data()), s, h);
  if (how == Implementation::Foreach) return step_foreach(s, h);

  for (std::size_t j = 0; j < s.params.size(); ++j) {
    const at::Tensor& param = s.params[j];
    ParamState& state = *s.states[j];
    at::Tensor& exp_avg = state[kExpAvg];
    at::Tensor& exp_avg_sq = state[kExpAvgSq];

    // The counter is float32 as in PyTorch (it stops growing at 2^24 there too);
    // bumping it through its pointer saves an operator dispatch per parameter.
    float& step = host_step(state[kStep]);
    step += 1.0f;

    at::Tensor grad = h.maximize ? s.grads[j].neg() : s.grads[j];
    if (decoupled_) {
      // x * 1 is exact, so skipping a zero decay cannot change the result.
      if (h.weight_decay != 0.0) param.mul_(1.0 - h.lr * h.weight_decay);
    } else if (h.weight_decay != 0.0) {
      grad = grad.add(param, h.weight_decay);
    }

    exp_avg.mul_(h.beta1).add_(grad, 1.0 - h.beta1);
    exp_avg_sq.mul_(h.beta2).addcmul_(grad, grad, 1.0 - h.beta2);

    const double bias_correction1 = 1.0 - std::pow(h.beta1, static_cast<double>(step));
    const double bias_correction2 = 1.0 - std::pow(h.beta2, static_cast<double>(step));
    const double step_size = h.lr / bias_correction1;
    const double bias_correction2_sqrt = std::sqrt(bias_correction2);

    // One temporary per parameter (PyTorch's expression makes two); the in-place
    // division runs the same kernel, so the values are identical.
    at::Tensor denom;
    if (h.amsgrad) {
      at::Tensor& max_exp_avg_sq = state[kMaxExpAvgSq];
      at::maximum_out(max_exp_avg_sq, max_exp_avg_sq, exp_avg_sq);
      denom = max_exp_avg_sq.sqrt().div_(bias_correction2_sqrt).add_(h.eps);
    } else {
      denom = exp_avg_sq.sqrt().div_(bias_correction2_sqrt).add_(h.eps);
    }
    param.addcdiv_(exp_avg, denom, -step_size);
  }
}

// The for-loop's arithmetic, operation for operation, on whole lists: each
// element goes through the same operations in the same order, so the values
// equal the for-loop's. The denominators of the whole group exist at once
// (PyTorch's foreach path holds them so too).
void Adam::step_foreach(const Stepped& s, const Hyper& h) {
  std::vector<at::Tensor> exp_avgs, exp_avg_sqs, max_exp_avg_sqs;
  std::vector<at::Scalar> bias_correction2_sqrt, neg_step_size;
  for (ParamState* state : s.states) {
    const float step = host_step((*state)[kStep]) += 1.0f;
    exp_avgs.push_back((*state)[kExpAvg]);
    exp_avg_sqs.push_back((*state)[kExpAvgSq]);
    if (h.amsgrad) max_exp_avg_sqs.push_back((*state)[kMaxExpAvgSq]);
    bias_correction2_sqrt.emplace_back(std::sqrt(1.0 - std::pow(h.beta2, static_cast<double>(step))));
    neg_step_size.emplace_back(-(h.lr / (1.0 - std::pow(h.beta1, static_cast<double>(step)))));
  }
  std::vector<at::Tensor> grads = h.maximize ? at::_foreach_neg(s.grads) : s.grads;
  if (decoupled_) {
    if (h.weight_decay != 0.0) at::_foreach_mul_(s.params, 1.0 - h.lr * h.weight_decay);
  } else if (h.weight_decay != 0.0) {
    grads = at::_foreach_add(grads, s.params, h.weight_decay);
  }
  at::_foreach_mul_(exp_avgs, h.beta1);
  at::_foreach_add_(exp_avgs, grads, 1.0 - h.beta1);
  at::_foreach_mul_(exp_avg_sqs, h.beta2);
  at::_foreach_addcmul_(exp_avg_sqs, grads, grads, 1.0 - h.beta2);
  std::vector<at::Tensor> denoms;
  if (h.amsgrad) {
    for (std::size_t j = 0; j < exp_avg_sqs.size(); ++j)
      at::maximum_out(max_exp_avg_sqs[j], max_exp_avg_sqs[j], exp_avg_sqs[j]);
    denoms = at::_foreach_sqrt(max_exp_avg_sqs);
  } else {
    denoms = at::_foreach_sqrt(exp_avg_sqs);
  }
  at::_foreach_div_(denoms, bias_correction2_sqrt);
  at::_foreach_add_(denoms, h.eps);
  at::_foreach_addcdiv_(s.params, exp_avgs, denoms, neg_step_size);
}

void Adam::step_fused(std::size_t group, const Stepped& s, const Hyper& h) {
#if ACCEL_TORCH_AT_LEAST(2, 1)
  std::vector<at::Tensor> exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps;
  const at::Tensor& first = s.params.front();
  for (std::size_t j = 0; j < s.params.size(); ++j) {
    const at::Tensor& param = s.params[j];
    TORCH_CHECK(param.device() == first.device() && param.scalar_type() == first.scalar_type(), name(),
                " (fused): every parameter of a group must be on one device with one dtype; parameter ",
                j + 1, " is ", param.scalar_type(), " on ", param.device(), ", the first ",
                first.scalar_type(), " on ", first.device());
    ParamState& state = *s.states[j];
    if (state[kStep].device() != param.device()) state[kStep] = state[kStep].to(param.device());
    steps.push_back(state[kStep]);
    exp_avgs.push_back(state[kExpAvg]);
    exp_avg_sqs.push_back(state[kExpAvgSq]);
    if (h.amsgrad) max_exp_avg_sqs.push_back(state[kMaxExpAvgSq]);
  }
  if (device_lrs_.size() <= group) device_lrs_.resize(group + 1);
  at::Tensor& lr = device_lrs_[group];
  if (!lr.defined() || lr.device() != first.device()) {
    TORCH_CHECK(!gpu::capturing(), name(), " (fused): a captured step needs an eager step before it");
    lr = at::empty({}, first.options().dtype(at::kFloat));
  }
  if (!gpu::capturing()) lr.fill_(h.lr);
  // As PyTorch's _fused_adam: the counters are bumped first, on the device.
  at::_foreach_add_(steps, 1);
  if (decoupled_) {
    at::_fused_adamw_(s.params, s.grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, h.beta1, h.beta2,
                      h.weight_decay, h.eps, h.amsgrad, h.maximize);
  } else {
    at::_fused_adam_(s.params, s.grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, h.beta1, h.beta2,
                     h.weight_decay, h.eps, h.amsgrad, h.maximize);
  }
#else
  (void)group, (void)s, (void)h;
  TORCH_CHECK(false, name(), ": the fused implementation needs LibTorch 2.1 or later");
#endif
}

void Adam::refresh_device_options() {
  at::NoGradGuard no_grad;
  for (std::size_t g = 0; g < device_lrs_.size(); ++g) {
    if (device_lrs_[g].defined()) device_lrs_[g].fill_(get(param_groups()[g].options, "lr"));
  }
}

bool Adam::has_implementation(Implementation how) const {
  if (how == Implementation::Fused) return ACCEL_TORCH_AT_LEAST(2, 1);
  return how == Implementation::ForLoop || how == Implementation::Foreach;
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
