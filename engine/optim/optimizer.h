// Base class of the engine's optimizers: parameter groups with hyper-parameters
// addressed by name, per-parameter state, and a flat state dict.
//
// The math of every optimizer follows PyTorch 1.13's single-tensor ("foreach=False")
// implementations exactly, so a run here and the same run in PyTorch produce the
// same parameters. Optimizers that have them also step a whole group at once on
// ATen's multi-tensor kernels (Implementation below), with the same arithmetic
// and the same state.
//
// Why the engine keeps its own optimizers rather than torch::optim's: LibTorch
// 1.13's C++ optimizers lack options recipes use (maximize, for one), keep
// per-parameter state keyed by each tensor's address (no stable names to write a
// state dict as safetensors and read it back in another process or on another
// world size), and save only through torch::save's archives. Checkpoints need the
// flat, ordered state dict below, schedulers need hyper-parameters addressed by
// name, and sharded data parallel needs to step a slice of each parameter; each
// optimizer here is a small layer over the same ATen arithmetic.
#pragma once
#include <ATen/ATen.h>

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace accel::optim {

// Hyper-parameters by name. Flags (nesterov, amsgrad, maximize) are stored as 0 or 1
// so that every option has one type: a scheduler or a checkpoint treats them alike.
using OptionMap = std::map<std::string, double>;

// A flat, ordered state dict: stable string keys to tensors, ready to be written as
// safetensors. Keys:
//   state.<i>.<slot>          per-parameter state (for example state.0.exp_avg),
//                             i counting parameters across groups in group order;
//                             absent for parameters never stepped. state.<i>.step
//                             is a 0-dim float32 tensor, as in PyTorch
//   param_groups.<g>.params   int64 1-D: the indices i of group g's parameters
//   param_groups.<g>.<option> 0-dim double: every hyper-parameter of group g
using StateDict = std::vector<std::pair<std::string, at::Tensor>>;

enum class OptionKind { Real, Flag };

// One hyper-parameter an optimizer accepts. An option without a default must be
// given when the optimizer is made (SGD's lr, as in PyTorch).
struct OptionSpec {
  std::string name;
  std::optional<double> default_value;
  OptionKind kind = OptionKind::Real;
};

// Parameters optimized with the same hyper-parameters. When passed to a constructor
// or to add_param_group, `options` holds only overrides of the optimizer's defaults;
// once added, it holds every option.
struct ParamGroup {
  std::vector<at::Tensor> params;
  OptionMap options;
};

// How step() updates a group, as PyTorch's `foreach` and `fused` arguments
// choose. ForLoop: one parameter at a time (PyTorch's single-tensor path, its
// default on the CPU). Foreach: the whole group through ATen's multi-tensor
// kernels (_foreach_*), a few kernel launches a group instead of several a
// parameter on a GPU (PyTorch's default when every parameter is on CUDA).
// Fused: one kernel a group (_fused_adam_/_fused_adamw_, LibTorch 2.x; its
// step counters live on the parameters' device). Auto: Foreach for a group
// whose parameters are all on CUDA, where the optimizer has it, else ForLoop.
// Every path keeps the same state, so a checkpoint of one loads into another.
enum class Implementation { Auto, ForLoop, Foreach, Fused };

// "auto", "for-loop", "foreach", "fused".
const char* implementation_name(Implementation implementation);

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter that has a gradient; parameters whose grad is
  // undefined are skipped and get no state. Runs with autograd disabled.
  void step();

  // Auto unless set; an implementation this optimizer or this build lacks is
  // an error that names both.
  void set_implementation(Implementation implementation);
  Implementation implementation() const { return implementation_; }

  // Copies the hyper-parameters a step reads on the device from the host
  // (the fused Adam kernels' learning rate): a CUDA graph that captured a
  // step replays it with the values put there before each replay
  // (engine/cuda_graph.h).
  virtual void refresh_device_options() {}

  // set_to_none releases each gradient (its memory returns to the allocator and the
  // next backward allocates a fresh one); otherwise gradients are detached and
  // zeroed in place.
  void zero_grad(bool set_to_none = true);

  // Appends a group. Every parameter must be a defined leaf tensor that no group
  // holds yet; options not given take the optimizer's defaults.
  void add_param_group(ParamGroup group);

  // Gives group `group` other parameters, keeping its hyper-parameters: sharded
  // data parallel points an optimizer at the shards of the parameters it was
  // made with (engine/parallel/sharded_model.h). Only before the first step:
  // state already held is an error.
  void replace_params(std::size_t group, std::vector<at::Tensor> params);

  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  const std::string& name() const { return name_; }
  const std::vector<OptionSpec>& option_specs() const { return specs_; }
  const OptionMap& defaults() const { return defaults_; }
  // Names of the per-parameter state tensors, as they appear in state dict keys.
  const std::vector<std::string>& state_slots() const { return slots_; }

  // Hyper-parameters of one group, by name. Unknown names, a group index out of
  // range and invalid values (a negative lr, a flag other than 0 or 1) are errors
  // that name the option and the optimizer.
  double option(std::size_t group, const std::string& option_name) const;
  void set_option(std::size_t group, const std::string& option_name, double value);

  // The state tensors in the result alias the live state (as PyTorch's do): clone
  // them to keep a snapshot while training goes on.
  StateDict state_dict() const;

  // Replaces every group's hyper-parameters and all per-parameter state; state is
  // copied (cast to each parameter's dtype and device), never aliased. Fails, leaving
  // the optimizer untouched, on a missing or unexpected key or a shape mismatch, with
  // a message naming the key.
  void load_state_dict(const StateDict& state_dict);

 protected:
  // One state tensor per entry of `slots`, undefined until first needed. A slot
  // named "step" is the step counter: a 0-dim float32 CPU tensor (PyTorch keeps it
  // so, and float32 counting is part of the math), never cast to the parameter's
  // dtype or device.
  using ParamState = std::vector<at::Tensor>;

  // `defaults` overrides the specs' defaults. Subclasses must call check_options on
  // defaults() and add their groups in their own constructor, where the virtual
  // functions below already dispatch to them.
  Optimizer(std::string name, std::vector<OptionSpec> specs, std::vector<std::string> slots,
            const OptionMap& defaults);

  // Adds the groups of a subclass constructor; groups holding no parameter at all
  // are an error (PyTorch's "empty parameter list").
  void add_initial_groups(std::vector<ParamGroup> groups);

  // Updates every parameter of `group` that has a gradient; states[j] is the state of
  // group.params[j]. `how` is never Auto, and only one has_implementation allows.
  virtual void step_group(const ParamGroup& group, std::vector<ParamState>& states,
                          Implementation how) = 0;

  // Which paths step_group runs besides ForLoop (which every optimizer has).
  virtual bool has_implementation(Implementation how) const { return how == Implementation::ForLoop; }

  // Throws, naming the option, when a complete option set is invalid (bounds and
  // constraints between options).
  virtual void check_options(const OptionMap& options) const = 0;

  // The slots a parameter in a group with these options holds once stepped; a
  // loaded state dict must give all of them or none.
  virtual std::vector<std::size_t> required_slots(const OptionMap& options) const = 0;

  // Reads an option that add_param_group guarantees is present.
  static double get(const OptionMap& options, const char* option_name);

 private:
  std::string name_;
  std::vector<OptionSpec> specs_;
  std::vector<std::string> slots_;
  OptionMap defaults_;
  std::vector<ParamGroup> groups_;
  std::vector<std::vector<ParamState>> states_;  // [group][parameter]
  Implementation implementation_ = Implementation::Auto;

  Implementation resolve(const ParamGroup& group) const;

  const OptionSpec& spec(const std::string& option_name) const;
  std::vector<std::string> option_names() const;
  // Checks what the spec alone says (flags are 0 or 1); `what` names the value in
  // the error ("option 'lr'", "'param_groups.0.lr'").
  void check_value(const OptionSpec& spec, double value, const std::string& what) const;
  std::size_t num_params() const;
};

}  // namespace accel::optim
