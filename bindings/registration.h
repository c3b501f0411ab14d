// Registration: how C++ functions become Lua functions.
//
// A binding is a plain C++ function (or capture-less lambda); `bind(name,
// fn)` reads its parameter types and generates the argument checks
// (value_conversion.h), so the tables in bindings/*_ops.cpp are declarative:
// one line per op, and no hand-written lua_to* calls. Every generated
// function runs inside the error boundary (error_boundary.h).
#pragma once

#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "bindings/error_boundary.h"
#include "bindings/value_conversion.h"

namespace accel::lua {

// How a parameter's value is held during the call. A `const at::Tensor&`
// parameter borrows the handle's tensor, which the argument's stack slot
// keeps alive until the call returns: no reference count is touched.
template <class P>
struct Slot {
  using type = std::decay_t<P>;
  static type read(Cursor& c) { return Arg<type>::get(c); }
  static type&& pass(type& value) { return std::move(value); }
};
template <>
struct Slot<const at::Tensor&> {
  using type = const at::Tensor*;
  static type read(Cursor& c) { return &tensor_argument(c); }
  static const at::Tensor& pass(type value) { return *value; }
};

template <class R, class... Args>
struct Binder {
  using Fn = R (*)(Args...);

  static int call(lua_State* L) {
    auto fn = reinterpret_cast<Fn>(lua_touserdata(L, lua_upvalueindex(1)));
    auto name = [L] { return lua_tostring(L, lua_upvalueindex(2)); };
    return protect(L, name, [&]() -> int {
      Cursor c{L, 1, 1};
      // Braced initialisation evaluates the arguments left to right.
      std::tuple<typename Slot<Args>::type...> args{read<Args>(c)...};
      auto invoke = [fn](auto&... held) -> R { return fn(Slot<Args>::pass(held)...); };
      if constexpr (std::is_void_v<R>) {
        std::apply(invoke, args);
        return 0;
      } else {
        return push(L, std::apply(invoke, args));
      }
    });
  }

  // Argument numbers in messages follow the stack slots read, so
  // parameters that read none (lua_State*) or several (TensorArgs) keep
  // the numbers of the ones after them right.
  template <class P>
  static typename Slot<P>::type read(Cursor& c) {
    typename Slot<P>::type value = Slot<P>::read(c);
    c.argument = c.index;
    return value;
  }
};

struct Binding {
  const char* name;
  lua_CFunction trampoline;
  void* function;
};

template <class R, class... Args>
Binding bind(const char* name, R (*fn)(Args...)) {
  return Binding{name, &Binder<R, Args...>::call, reinterpret_cast<void*>(fn)};
}
// Capture-less lambdas decay to function pointers.
template <class Lambda>
Binding bind(const char* name, Lambda lambda) {
  return bind(name, +lambda);
}

// Sets table[name] = the bound function for each binding; table at
// `table_index`. Errors name the function as `prefix .. name`.
void register_bindings(lua_State* L, int table_index, const char* prefix,
                       const std::vector<Binding>& bindings);

}  // namespace accel::lua
