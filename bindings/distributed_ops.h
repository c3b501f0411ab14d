// The accel.core.dist table: process state, collectives, gradient sync.
#pragma once

extern "C" {
#include <lua.h>
}

namespace accel {
struct CommunicatorOptions;
}

namespace accel::lua {

// Reads the process state from the environment and pushes the dist table.
// The communicator itself is created on first use.
void open_distributed(lua_State* L, const CommunicatorOptions& options);

}  // namespace accel::lua
