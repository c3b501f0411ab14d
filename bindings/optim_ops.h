// The engine optimizer behind an accel.optim value, for other bindings
// (sharding points an optimizer at the shards of its parameters).
#pragma once

extern "C" {
#include <lua.h>
}

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace accel::optim {
class Optimizer;
using StateDict = std::vector<std::pair<std::string, at::Tensor>>;
}

namespace accel::lua {

// The optimizer at stack index `idx`; anything else is an argument error.
optim::Optimizer& optimizer_arg(lua_State* L, int idx);

// A flat optimizer state dict as a Lua table of name -> tensor, and back.
void push_state_dict(lua_State* L, const optim::StateDict& dict);
optim::StateDict read_state_dict(lua_State* L, int idx);

}  // namespace accel::lua
