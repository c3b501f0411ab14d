#include "bindings/typed_userdata.h"

#include "bindings/registration.h"

namespace accel::lua {

void set_handle_metatable(lua_State* L, const HandleType& type, lua_CFunction destroy) {
  if (luaL_newmetatable(L, type.name)) {
    lua_newtable(L);
    register_bindings(L, -1, type.method_prefix, type.methods());
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, destroy);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
}

}  // namespace accel::lua
