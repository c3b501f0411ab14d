// Subscripts beyond t[i]: Torch7's table form t[{ {1, 3}, 2 }], index and
// mask tensors, for reading and for assignment (see tensor_subscripts.cpp).
#pragma once

#include <ATen/ATen.h>

extern "C" {
#include <lua.h>
}

namespace accel::lua {

// t[key] where the key at stack index `key` is a table or a tensor.
at::Tensor read_subscript(lua_State* L, const at::Tensor& t, int key);
// t[key] = value, the value (a number, boolean or tensor) at index `value`.
void write_subscript(lua_State* L, const at::Tensor& t, int key, int value);

}  // namespace accel::lua
