// Tensors as Lua values: a full userdata holding an at::Tensor.
//
// Lua sees only the small handle, so the garbage collector would not know
// that a handle may pin megabytes. Every new handle's bytes are counted, and
// once the bytes made since the last collection exceed what was live after
// it (with a floor), a full collection runs: memory stays within about twice
// the live tensor bytes, the way Lua's own pause works for Lua objects.
#pragma once

extern "C" {
#include <lua.h>
}

#include <cstdint>

namespace accel::lua {

struct TensorStats {
  int64_t live_handles = 0;  // tensor handles Lua has not collected yet
  int64_t live_bytes = 0;    // bytes of storage those handles reference
  int64_t collections = 0;   // full collections triggered by tensor bytes
};

TensorStats tensor_stats();

// Creates the tensor metatable; `methods` (a table at the given index) is
// what `t:name(...)` finds.
void open_tensor_metatable(lua_State* L, int methods_index);

}  // namespace accel::lua
