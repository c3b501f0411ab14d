#include "bindings/registration.h"

#include <string>

namespace accel::lua {

void register_bindings(lua_State* L, int table_index, const char* prefix,
                       const std::vector<Binding>& bindings) {
  table_index = table_index < 0 ? lua_gettop(L) + table_index + 1 : table_index;
  for (const Binding& b : bindings) {
    lua_pushlightuserdata(L, b.function);
    std::string qualified = std::string(prefix) + b.name;
    lua_pushlstring(L, qualified.data(), qualified.size());
    lua_pushcclosure(L, b.trampoline, 2);
    lua_setfield(L, table_index, b.name);
  }
}

}  // namespace accel::lua
