#include "bindings/end_of_run.h"

extern "C" {
#include <lua.h>
}

namespace accel::lua {
namespace {

const char kEndOfRun = 0;  // its address is the error object

}  // namespace

int raise_end_of_run(lua_State* L) {
  lua_pushlightuserdata(L, const_cast<char*>(&kEndOfRun));
  return lua_error(L);
}

bool is_end_of_run(lua_State* L, int index) {
  return lua_islightuserdata(L, index) && lua_touserdata(L, index) == &kEndOfRun;
}

}  // namespace accel::lua
