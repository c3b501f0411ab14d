// Typed userdata: the engine's objects (optimizers, loss scalers, epoch
// plans, prefetchers...) as Lua values. One helper for every handle type,
// so each gets the same metatable layout: its methods under __index, named
// `prefix .. method` in errors, and a __gc that runs the C++ destructor.
//
//   const HandleType kOptimizer{"accel.Optimizer", "Optimizer:", optimizer_methods};
//   push_handle(L, kOptimizer, OptimizerHandle{...});
//   OptimizerHandle& h = check_handle<OptimizerHandle>(L, 1, kOptimizer);
#pragma once

extern "C" {
#include <lauxlib.h>
#include <lua.h>
}

#include <new>
#include <string>
#include <utility>
#include <vector>

#include "bindings/error_boundary.h"
#include "bindings/tensor_handle.h"

namespace accel::lua {

struct Binding;  // registration.h

struct HandleType {
  const char* name;           // the metatable's registry name: "accel.Optimizer"
  const char* method_prefix;  // how errors name its methods: "Optimizer:"
  std::vector<Binding> (*methods)();
};

// Gives the userdata on top of the stack the metatable of `type`, made on
// first use; `destroy` is its __gc.
void set_handle_metatable(lua_State* L, const HandleType& type, lua_CFunction destroy);

template <class T>
int destroy_handle(lua_State* L) {
  static_cast<T*>(lua_touserdata(L, 1))->~T();
  return 0;
}

// Pushes `value` as a new userdata of `type` and returns the copy Lua owns.
template <class T>
T& push_handle(lua_State* L, const HandleType& type, T value) {
  T* held = new (lua_newuserdata(L, sizeof(T))) T(std::move(value));
  set_handle_metatable(L, type, destroy_handle<T>);
  return *held;
}

// The object at `idx` when it is a `type` userdata, else nullptr.
template <class T>
T* test_handle(lua_State* L, int idx, const HandleType& type) {
  return static_cast<T*>(luaL_testudata(L, idx, type.name));
}

// The object at `idx`; anything else is an argument error naming the type.
template <class T>
T& check_handle(lua_State* L, int idx, const HandleType& type) {
  if (T* held = test_handle<T>(L, idx, type)) return *held;
  throw ArgError("argument " + std::to_string(idx) + ": expected a " + type.name + ", got a " +
                 type_name_at(L, idx));
}

}  // namespace accel::lua
