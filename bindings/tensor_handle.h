// Tensors as Lua values: a full userdata holding an at::Tensor.
//
// Lua sees only the small handle, so the garbage collector would not know
// that a handle may pin megabytes. Every new handle's bytes are counted, and
// once the bytes made since the last collection exceed what was live after
// it (with a floor of 4 MiB and a ceiling of 64 MiB), a full collection runs:
// memory stays within about twice the live tensor bytes, the way Lua's own
// pause works for Lua objects, and within 64 MiB of them for large models.
#pragma once

extern "C" {
#include <lua.h>
}

#include <cstdint>

namespace at {
class Tensor;
}

namespace accel::lua {

void push_tensor(lua_State* L, at::Tensor t);
// The tensor at `idx`, or nullptr when the value is not a tensor.
at::Tensor* to_tensor(lua_State* L, int idx);
// "tensor" for a tensor handle, else Lua's name of the value's type.
const char* type_name_at(lua_State* L, int idx);

struct TensorStats {
  int64_t live_handles = 0;  // tensor handles Lua has not collected yet
  int64_t live_bytes = 0;    // bytes of storage those handles reference
  int64_t collections = 0;   // full collections triggered by tensor bytes
};

TensorStats tensor_stats();

// Drops the tensor of the handle at `idx` now, rather than when the
// collector finds the handle dead, and takes its bytes off the count. For
// library code that holds the only reference to a handle nothing else can
// reach (nn.Sequential's intermediate outputs): the memory goes back while
// it is still in cache, and collections come less often. The handle holds
// an undefined tensor afterwards.
void release_tensor(lua_State* L, int idx);

// Creates the tensor metatable; `methods` (a table at the given index) is
// what `t:name(...)` finds.
void open_tensor_metatable(lua_State* L, int methods_index);

}  // namespace accel::lua
