// Field access and element assignment on tensors (__index, __newindex).
#pragma once

extern "C" {
#include <lua.h>
}

namespace accel::lua {

// Adds __index and __newindex to the method table at `methods_index`; they
// become metamethods with the rest (see open_tensor_metatable).
void add_field_metamethods(lua_State* L, int methods_index);

}  // namespace accel::lua
