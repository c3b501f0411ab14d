// The error boundary: the one place where C++ exceptions become Lua errors.
// Every binding runs inside `protect`, so an engine error, a LibTorch check
// or a bad argument reaches the recipe as a Lua error "file:line: name:
// message (called with: ...)" naming the recipe line, never as a C++ abort.
#pragma once

extern "C" {
#include <lauxlib.h>
#include <lua.h>
}

#include <exception>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace accel::lua {

// A bad argument: raised by conversions and option readers, reported like
// any other error.
struct ArgError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Pushes "file:line: " of the innermost caller outside the accel Lua library,
// so errors point at the recipe line rather than at library internals.
void push_caller_location(lua_State* L);
void set_library_source_prefix(const std::string& lua_dir);

// Pushes the Lua error value for a failed call of `name`.
void push_error(lua_State* L, const char* name, const std::string& message);
// The message for `e`; LibTorch's C++ backtrace goes to the rank's error
// file, never into the Lua message.
std::string describe_exception(const std::exception& e);

// Runs `body`; a C++ exception becomes a Lua error raised after the catch
// block has ended. `name` is a string, or a function giving it: bindings
// read their name only when they fail.
template <class Name, class Body>
int protect(lua_State* L, Name&& name, Body&& body) {
  {
    std::string message;
    try {
      return body();
    } catch (const std::exception& e) {
      message = describe_exception(e);
    }
    if constexpr (std::is_invocable_v<Name>) {
      push_error(L, name(), message);
    } else {
      push_error(L, name, message);
    }
  }  // no C++ object may be alive when lua_error unwinds
  return lua_error(L);
}

}  // namespace accel::lua
