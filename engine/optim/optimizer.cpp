#include "engine/optim/optimizer.h"

#include <ATen/core/grad_mode.h>

#include "engine/compat.h"

#include <algorithm>
#include <unordered_set>

namespace accel::optim {

namespace {

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out.empty() ? "(none)" : out;
}

std::string group_key(std::size_t group, const std::string& field) {
  return "param_groups." + std::to_string(group) + "." + field;
}

std::string state_key(std::size_t index, const std::string& slot) {
  return "state." + std::to_string(index) + "." + slot;
}

bool is_step_slot(const std::string& slot) { return slot == "step"; }

}  // namespace

Optimizer::Optimizer(std::string name, std::vector<OptionSpec> specs,
                     std::vector<std::string> slots, const OptionMap& defaults)
    : name_(std::move(name)), specs_(std::move(specs)), slots_(std::move(slots)) {
  for (const auto& [key, value] : defaults) check_value(spec(key), value, "option '" + key + "'");
  for (const auto& s : specs_) {
    auto it = defaults.find(s.name);
    if (it != defaults.end()) {
      defaults_[s.name] = it->second;
    } else {
      TORCH_CHECK(s.default_value.has_value(), name_, ": option '", s.name, "' is required");
      defaults_[s.name] = *s.default_value;
    }
  }
}

void Optimizer::add_initial_groups(std::vector<ParamGroup> groups) {
  bool any_param = false;
  for (const auto& g : groups) any_param = any_param || !g.params.empty();
  TORCH_CHECK(any_param, name_, " got an empty parameter list");
  for (auto& g : groups) add_param_group(std::move(g));
}

void Optimizer::add_param_group(ParamGroup group) {
  OptionMap options = defaults_;
  for (const auto& [key, value] : group.options) {
    check_value(spec(key), value, "option '" + key + "'");
    options[key] = value;
  }
  check_options(options);

  std::unordered_set<const c10::TensorImpl*> held;
  for (const auto& other : groups_)
    for (const auto& p : other.params) held.insert(p.unsafeGetTensorImpl());
  const std::size_t first_index = num_params();
  for (std::size_t j = 0; j < group.params.size(); ++j) {
    const at::Tensor& p = group.params[j];
    const std::size_t index = first_index + j;
    TORCH_CHECK(p.defined(), name_, ": parameter ", index, " is an undefined tensor");
    TORCH_CHECK(p.is_leaf(), name_, ": parameter ", index,
                " is not a leaf tensor (it was computed from other tensors); optimize the "
                "tensor it came from, or a detached copy");
    TORCH_CHECK(held.insert(p.unsafeGetTensorImpl()).second, name_, ": parameter ", index,
                " appears more than once among the parameter groups");
  }

  states_.emplace_back(group.params.size(), ParamState(slots_.size()));
  groups_.push_back(ParamGroup{std::move(group.params), std::move(options)});
}

void Optimizer::replace_params(std::size_t group, std::vector<at::Tensor> params) {
  TORCH_CHECK(group < groups_.size(), name_, ": param group ", group + 1, " does not exist");
  for (const ParamState& state : states_[group]) {
    for (const at::Tensor& slot : state) {
      TORCH_CHECK(!slot.defined(), name_, ": param group ", group + 1,
                  " has state already (the optimizer has stepped); prepare it before its first step");
    }
  }
  for (const at::Tensor& p : params) {
    TORCH_CHECK(p.defined() && p.is_leaf(), name_, ": a replacement parameter must be a defined leaf tensor");
  }
  states_[group].assign(params.size(), ParamState(slots_.size()));
  groups_[group].params = std::move(params);
}

const char* implementation_name(Implementation implementation) {
  switch (implementation) {
    case Implementation::Auto: return "auto";
    case Implementation::ForLoop: return "for-loop";
    case Implementation::Foreach: return "foreach";
    case Implementation::Fused: return "fused";
  }
  return "?";
}

void Optimizer::set_implementation(Implementation implementation) {
  TORCH_CHECK(implementation == Implementation::Auto || has_implementation(implementation), name_,
              " has no ", implementation_name(implementation), " implementation",
              implementation == Implementation::Fused && !ACCEL_TORCH_AT_LEAST(2, 0)
                  ? " in this build (LibTorch " TORCH_VERSION "; fused kernels need LibTorch 2.x)"
                  : "");
  implementation_ = implementation;
}

Implementation Optimizer::resolve(const ParamGroup& group) const {
  if (implementation_ != Implementation::Auto) return implementation_;
  const bool all_cuda = std::all_of(group.params.begin(), group.params.end(),
                                    [](const at::Tensor& p) { return p.is_cuda(); });
  return all_cuda && has_implementation(Implementation::Foreach) ? Implementation::Foreach
                                                                 : Implementation::ForLoop;
}

void Optimizer::step() {
  // Updates are in place on leaves that require grad; autograd must not record them.
  at::NoGradGuard no_grad;
  for (std::size_t g = 0; g < groups_.size(); ++g) step_group(groups_[g], states_[g], resolve(groups_[g]));
}

void Optimizer::zero_grad(bool set_to_none) {
  for (auto& group : groups_) {
    for (auto& p : group.params) {
      at::Tensor& grad = p.mutable_grad();
      if (!grad.defined()) continue;
      if (set_to_none) {
        grad.reset();
        continue;
      }
      // A grad built with create_graph has history; cut it before zeroing in place.
      if (grad.grad_fn()) {
        grad.detach_();
      } else {
        grad.requires_grad_(false);
      }
      grad.zero_();
    }
  }
}

double Optimizer::option(std::size_t group, const std::string& option_name) const {
  TORCH_CHECK(group < groups_.size(), name_, " has ", groups_.size(),
              " parameter group(s); there is no group ", group);
  spec(option_name);
  return groups_[group].options.at(option_name);
}

void Optimizer::set_option(std::size_t group, const std::string& option_name, double value) {
  TORCH_CHECK(group < groups_.size(), name_, " has ", groups_.size(),
              " parameter group(s); there is no group ", group);
  check_value(spec(option_name), value, "option '" + option_name + "'");
  OptionMap candidate = groups_[group].options;
  candidate[option_name] = value;
  check_options(candidate);
  groups_[group].options = std::move(candidate);
}

StateDict Optimizer::state_dict() const {
  StateDict out;
  std::size_t index = 0;
  for (const auto& group_states : states_) {
    for (const auto& state : group_states) {
      for (std::size_t s = 0; s < slots_.size(); ++s)
        if (state[s].defined()) out.emplace_back(state_key(index, slots_[s]), state[s]);
      ++index;
    }
  }
  index = 0;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const auto n = static_cast<int64_t>(groups_[g].params.size());
    const auto first = static_cast<int64_t>(index);
    out.emplace_back(group_key(g, "params"), at::arange(first, first + n, at::kLong));
    for (const auto& [key, value] : groups_[g].options)
      out.emplace_back(group_key(g, key), at::scalar_tensor(value, at::kDouble));
    index += groups_[g].params.size();
  }
  return out;
}

void Optimizer::load_state_dict(const StateDict& state_dict) {
  const std::string where = name_ + ".load_state_dict: ";
  struct Entry {
    const at::Tensor* tensor;
    bool used;
  };
  std::map<std::string, Entry> entries;
  for (const auto& [key, tensor] : state_dict) {
    TORCH_CHECK(entries.emplace(key, Entry{&tensor, false}).second, where, "duplicate key '", key,
                "'");
  }
  auto take = [&](const std::string& key) -> const at::Tensor* {
    auto it = entries.find(key);
    if (it == entries.end()) return nullptr;
    it->second.used = true;
    TORCH_CHECK(it->second.tensor->defined(), where, "key '", key, "' holds an undefined tensor");
    return it->second.tensor;
  };
  auto require = [&](const std::string& key) -> const at::Tensor& {
    const at::Tensor* t = take(key);
    TORCH_CHECK(t != nullptr, where, "missing key '", key, "'");
    return *t;
  };

  // Everything is validated and copied before the optimizer changes, so a bad state
  // dict leaves it as it was.
  at::NoGradGuard no_grad;
  std::vector<OptionMap> new_options(groups_.size());
  std::vector<std::vector<ParamState>> new_states(groups_.size());
  std::size_t index = 0;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const auto& params = groups_[g].params;
    const std::string params_key = group_key(g, "params");
    const at::Tensor& listed = require(params_key);
    const auto first = static_cast<int64_t>(index);
    const auto n = static_cast<int64_t>(params.size());
    TORCH_CHECK(listed.dim() == 1 && !at::isFloatingType(listed.scalar_type()) &&
                    listed.numel() == n &&
                    listed.to(at::kLong).cpu().equal(at::arange(first, first + n, at::kLong)),
                where, "'", params_key, "' must list parameters ", first, " to ", first + n - 1,
                " (this optimizer's group ", g, " has ", n, " parameter(s)), got ", listed.sizes(),
                " ", listed.scalar_type(), " tensor");

    for (const auto& s : specs_) {
      const std::string key = group_key(g, s.name);
      const at::Tensor& t = require(key);
      TORCH_CHECK(t.numel() == 1, where, "'", key, "' must hold one value, got shape ", t.sizes());
      const double value = t.item<double>();
      check_value(s, value, "'" + key + "'");
      new_options[g][s.name] = value;
    }
    check_options(new_options[g]);

    const std::vector<std::size_t> required = required_slots(new_options[g]);
    for (std::size_t j = 0; j < params.size(); ++j, ++index) {
      const at::Tensor& param = params[j];
      ParamState state(slots_.size());
      for (std::size_t s = 0; s < slots_.size(); ++s) {
        const std::string key = state_key(index, slots_[s]);
        const at::Tensor* t = take(key);
        if (t == nullptr) continue;
        if (is_step_slot(slots_[s])) {
          TORCH_CHECK(t->numel() == 1, where, "'", key, "' must hold one value, got shape ",
                      t->sizes());
          state[s] = at::empty({}, at::kFloat).copy_(t->reshape({}));
        } else {
          TORCH_CHECK(t->sizes() == param.sizes(), where, "'", key, "' has shape ", t->sizes(),
                      " but parameter ", index, " has shape ", param.sizes());
          // Integers copied into a floating parameter's state would become floats silently.
          TORCH_CHECK(!param.is_floating_point() || t->is_floating_point(), where, "'", key, "' is ",
                      t->scalar_type(), " but parameter ", index, " is ", param.scalar_type(),
                      " (integer state cannot become a floating parameter's)");
          // As PyTorch: floating-point state follows the parameter's dtype, all of it
          // its device.
          const auto dtype = param.is_floating_point() ? param.scalar_type() : t->scalar_type();
          state[s] = at::empty_like(param, param.options().dtype(dtype)).copy_(*t);
        }
      }
      const bool any =
          std::any_of(state.begin(), state.end(), [](const at::Tensor& t) { return t.defined(); });
      for (std::size_t s : required) {
        TORCH_CHECK(!any || state[s].defined(), where, "missing key '", state_key(index, slots_[s]),
                    "' (parameter ", index, " has other state, so this is required)");
      }
      new_states[g].push_back(std::move(state));
    }
  }

  for (const auto& [key, entry] : entries) {
    TORCH_CHECK(entry.used, where, "unexpected key '", key, "' (this optimizer has ",
                groups_.size(), " parameter group(s) and ", index,
                " parameter(s); its per-parameter state slots are: ", join(slots_), ")");
  }

  for (std::size_t g = 0; g < groups_.size(); ++g) groups_[g].options = std::move(new_options[g]);
  states_ = std::move(new_states);
}

double Optimizer::get(const OptionMap& options, const char* option_name) {
  auto it = options.find(option_name);
  TORCH_INTERNAL_ASSERT(it != options.end(), "option '", option_name, "' missing from a group");
  return it->second;
}

const OptionSpec& Optimizer::spec(const std::string& option_name) const {
  auto it = std::find_if(specs_.begin(), specs_.end(),
                         [&](const OptionSpec& s) { return s.name == option_name; });
  TORCH_CHECK(it != specs_.end(), name_, " has no option '", option_name,
              "'; its options are: ", join(option_names()));
  return *it;
}

std::vector<std::string> Optimizer::option_names() const {
  std::vector<std::string> names;
  for (const auto& s : specs_) names.push_back(s.name);
  return names;
}

void Optimizer::check_value(const OptionSpec& s, double value, const std::string& what) const {
  TORCH_CHECK(s.kind != OptionKind::Flag || value == 0.0 || value == 1.0, name_, ": ", what,
              " is a flag and must be 0 or 1 (false or true), got ", value);
}

std::size_t Optimizer::num_params() const {
  std::size_t n = 0;
  for (const auto& g : groups_) n += g.params.size();
  return n;
}

}  // namespace accel::optim
