// The native half of the `accel` Lua module, loaded as `accel.core`.
#pragma once

extern "C" {
#include <lua.h>
}

namespace accel {
struct CommunicatorOptions;
}

namespace accel::lua {

// Pushes the accel.core table: tensor functions, nn.functional, dist,
// optim, data helpers and runtime switches, and creates the tensor
// metatable. Collectives use `options` when the process group is joined.
int open_accel_core(lua_State* L, const CommunicatorOptions& options);

}  // namespace accel::lua
