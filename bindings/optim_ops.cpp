// accel.core.optim: the engine's optimizers as Lua values.
//   optim.AdamW(params, {lr = 1e-3, betas = {0.9, 0.999}, weight_decay = 0.01})
//   optim.SGD({{params = a, lr = 0.1}, {params = b}}, {lr = 0.01, momentum = 0.9})
// Group indices are 1-based, like every index in the Lua API.
#include <memory>

#include "bindings/optim_ops.h"

#include "bindings/op_tables.h"
#include "engine/optim/adagrad.h"
#include "engine/optim/adam.h"
#include "engine/optim/rmsprop.h"
#include "engine/optim/sgd.h"

namespace accel::lua {
namespace {

using optim::OptionMap;
using optim::Optimizer;
using optim::ParamGroup;

std::vector<Binding> optimizer_methods();

const HandleType kOptimizer{"accel.Optimizer", "Optimizer:", optimizer_methods};

// Hyper-parameters from a Lua table: numbers, booleans (flags) and
// betas = {beta1, beta2}. Keys other than `params` are options; the
// optimizer itself refuses unknown ones, naming them.
OptionMap read_options(lua_State* L, int idx) {
  OptionMap options;
  if (idx == 0 || lua_isnoneornil(L, idx)) return options;
  luaL_checktype(L, idx, LUA_TTABLE);
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {
    if (lua_type(L, -2) != LUA_TSTRING) {  // array part: a group's own params
      lua_pop(L, 1);
      continue;
    }
    std::string key = lua_tostring(L, -2);
    int type = lua_type(L, -1);
    if (key == "params") {
    } else if (key == "betas" && type == LUA_TTABLE) {
      lua_rawgeti(L, -1, 1);
      lua_rawgeti(L, -2, 2);
      TORCH_CHECK(lua_isnumber(L, -2) && lua_isnumber(L, -1),
                  "option 'betas' must be a table of two numbers");
      options["beta1"] = lua_tonumber(L, -2);
      options["beta2"] = lua_tonumber(L, -1);
      lua_pop(L, 2);
    } else if (type == LUA_TNUMBER) {
      options[key] = lua_tonumber(L, -1);
    } else if (type == LUA_TBOOLEAN) {
      options[key] = lua_toboolean(L, -1) ? 1.0 : 0.0;
    } else {
      TORCH_CHECK(false, "option '", key, "' must be a number or boolean, got ",
                  lua_typename(L, type));
    }
    lua_pop(L, 1);
  }
  return options;
}

std::vector<at::Tensor> read_tensor_array(lua_State* L, int idx, const std::string& what) {
  std::vector<at::Tensor> out;
  size_t n = lua_objlen(L, idx);
  for (size_t i = 1; i <= n; ++i) {
    lua_rawgeti(L, idx, static_cast<int>(i));
    at::Tensor* t = to_tensor(L, -1);
    lua_pop(L, 1);
    TORCH_CHECK(t, what, "[", i, "] is not a tensor");
    out.push_back(*t);
  }
  return out;
}

// A list of tensors, or a list of groups {params = {...}, lr = ...}.
std::vector<ParamGroup> read_groups(lua_State* L, int idx) {
  luaL_checktype(L, idx, LUA_TTABLE);
  lua_rawgeti(L, idx, 1);
  bool grouped = lua_type(L, -1) == LUA_TTABLE && !to_tensor(L, -1);
  lua_pop(L, 1);
  if (!grouped) return {ParamGroup{read_tensor_array(L, idx, "params"), {}}};
  std::vector<ParamGroup> groups;
  size_t n = lua_objlen(L, idx);
  for (size_t g = 1; g <= n; ++g) {
    lua_rawgeti(L, idx, static_cast<int>(g));
    int group = lua_gettop(L);
    lua_getfield(L, group, "params");
    TORCH_CHECK(lua_type(L, -1) == LUA_TTABLE, "param group ", g, " has no 'params' table");
    ParamGroup pg{read_tensor_array(L, lua_gettop(L), "param group " + std::to_string(g) + " params"),
                  read_options(L, group)};
    lua_pop(L, 2);
    groups.push_back(std::move(pg));
  }
  return groups;
}

// PyTorch's `foreach` (true, false, or absent for the default) and `fused`
// flags, taken out of the options: they choose how the optimizer steps, not
// a hyper-parameter of its groups (engine/optim/optimizer.h).
optim::Implementation take_implementation(OptionMap& options) {
  auto take = [&](const char* key) -> c10::optional<bool> {
    auto it = options.find(key);
    if (it == options.end()) return c10::nullopt;
    const bool on = it->second != 0.0;
    options.erase(it);
    return on;
  };
  const c10::optional<bool> foreach = take("foreach");
  const c10::optional<bool> fused = take("fused");
  TORCH_CHECK(!(fused.value_or(false) && foreach.value_or(false)),
              "options 'foreach' and 'fused' cannot both be true");
  if (fused.value_or(false)) return optim::Implementation::Fused;
  if (foreach) return *foreach ? optim::Implementation::Foreach : optim::Implementation::ForLoop;
  return optim::Implementation::Auto;
}

template <class Kind>
Pushed make_optimizer(lua_State* L) {
  OptionMap options = read_options(L, 2);
  const optim::Implementation implementation = take_implementation(options);
  auto opt = std::make_unique<Kind>(read_groups(L, 1), options);
  opt->set_implementation(implementation);
  push_handle<std::unique_ptr<Optimizer>>(L, kOptimizer, std::move(opt));
  return Pushed{1};
}

Optimizer& self(lua_State* L) {
  auto* handle = test_handle<std::unique_ptr<Optimizer>>(L, 1, kOptimizer);
  if (!handle) throw ArgError("expected an optimizer as argument 1 (use opt:method(...))");
  return **handle;
}

}  // namespace

optim::Optimizer& optimizer_arg(lua_State* L, int idx) {
  return *check_handle<std::unique_ptr<Optimizer>>(L, idx, kOptimizer);
}

void push_state_dict(lua_State* L, const optim::StateDict& dict) {
  lua_createtable(L, 0, static_cast<int>(dict.size()));
  for (const auto& [key, tensor] : dict) {
    push_tensor(L, tensor);
    lua_setfield(L, -2, key.c_str());
  }
}

optim::StateDict read_state_dict(lua_State* L, int idx) {
  luaL_checktype(L, idx, LUA_TTABLE);
  optim::StateDict dict;
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {
    at::Tensor* t = to_tensor(L, -1);
    TORCH_CHECK(lua_type(L, -2) == LUA_TSTRING && t, "an optimizer state dict maps names to tensors");
    dict.emplace_back(lua_tostring(L, -2), *t);
    lua_pop(L, 1);
  }
  return dict;
}

namespace {

size_t group_index(const Optimizer& opt, int64_t group) {
  TORCH_CHECK(group >= 1 && group <= static_cast<int64_t>(opt.param_groups().size()),
              "param group ", group, " does not exist (", opt.name(), " has ",
              opt.param_groups().size(), "; groups are 1-based)");
  return static_cast<size_t>(group - 1);
}

Pushed state_dict(lua_State* L) {
  push_state_dict(L, self(L).state_dict());
  return Pushed{1};
}

void load_state_dict(lua_State* L) {
  Optimizer& opt = self(L);
  opt.load_state_dict(read_state_dict(L, 2));
}

std::vector<Binding> optimizer_methods() {
  return {
      bind("step", [](lua_State* L, Receiver) { self(L).step(); }),
      bind("zero_grad", [](lua_State* L, Receiver, c10::optional<bool> set_to_none) {
        self(L).zero_grad(set_to_none.value_or(true));
      }),
      bind("num_param_groups", [](lua_State* L, Receiver) {
        return static_cast<int64_t>(self(L).param_groups().size());
      }),
      // option(name[, group]) and set_option(name, value[, group]); without a
      // group, set_option sets every group.
      bind("option", [](lua_State* L, Receiver, std::string name, c10::optional<int64_t> group) {
        Optimizer& opt = self(L);
        return opt.option(group_index(opt, group.value_or(1)), name);
      }),
      bind("set_option", [](lua_State* L, Receiver, std::string name, double value,
                            c10::optional<int64_t> group) {
        Optimizer& opt = self(L);
        if (group) {
          opt.set_option(group_index(opt, *group), name, value);
          return;
        }
        for (size_t g = 0; g < opt.param_groups().size(); ++g) opt.set_option(g, name, value);
      }),
      bind("params", [](lua_State* L, Receiver, c10::optional<int64_t> group) {
        Optimizer& opt = self(L);
        return opt.param_groups()[group_index(opt, group.value_or(1))].params;
      }),
      // replace_params(group, params): the group steps `params` instead,
      // keeping its hyper-parameters; before the first step (prepare).
      bind("replace_params", [](lua_State* L, Receiver, int64_t group, TensorList params) {
        Optimizer& opt = self(L);
        opt.replace_params(group_index(opt, group), params.value);
      }),
      bind("name", [](lua_State* L, Receiver) { return self(L).name(); }),
      // "auto", "for-loop", "foreach" or "fused" (engine/optim/optimizer.h).
      bind("implementation", [](lua_State* L, Receiver) {
        return std::string(optim::implementation_name(self(L).implementation()));
      }),
      bind("set_implementation", [](lua_State* L, Receiver, std::string name) {
        for (auto how : {optim::Implementation::Auto, optim::Implementation::ForLoop, optim::Implementation::Foreach,
                         optim::Implementation::Fused}) {
          if (name == optim::implementation_name(how)) return self(L).set_implementation(how);
        }
        throw ArgError("unknown implementation '" + name + "' (auto, for-loop, foreach or fused)");
      }),
      // Before a CUDA graph replays a captured step (engine/optim/optimizer.h).
      bind("refresh_device_options", [](lua_State* L, Receiver) { self(L).refresh_device_options(); }),
      bind("state_dict", state_dict),
      bind("load_state_dict", load_state_dict),
  };
}

}  // namespace

std::vector<Binding> optim_bindings() {
  return {
      bind("SGD", make_optimizer<optim::SGD>),
      bind("Adam", make_optimizer<optim::Adam>),
      bind("AdamW", make_optimizer<optim::AdamW>),
      bind("RMSprop", make_optimizer<optim::RMSprop>),
      bind("Adagrad", make_optimizer<optim::Adagrad>),
  };
}

}  // namespace accel::lua
