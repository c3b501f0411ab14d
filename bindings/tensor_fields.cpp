// `t.field`, `t[i]`, `t.field = v` and `t[i] = v`: the tensor's __index and
// __newindex. Method lookup comes first and stays a single table read.
#include "bindings/tensor_fields.h"

#include "bindings/lua_support.h"

namespace accel::lua {
namespace {

at::Tensor& self(lua_State* L) {
  at::Tensor* t = to_tensor(L, 1);
  if (!t) throw ArgError("expected a tensor on the left of '.' or '['");
  return *t;
}

int64_t position(lua_State* L, int idx) {
  Cursor c{L, idx, 2};
  return Arg<Position>::get(c).value;
}

int read_field(lua_State* L) {
  at::Tensor& t = self(L);
  if (lua_type(L, 2) == LUA_TNUMBER) {
    TORCH_CHECK(t.dim() > 0, "cannot index a 0-dim tensor with t[i]; use t:item()");
    return push(L, t.select(0, position(L, 2)));
  }
  std::string key = lua_tostring(L, 2);
  if (key == "grad") return push(L, t.grad());
  if (key == "requires_grad") return push(L, t.requires_grad());
  if (key == "is_leaf") return push(L, t.is_leaf());
  if (key == "shape") return push(L, t.sizes().vec());
  if (key == "dtype") return push(L, std::string(dtype_name(t.scalar_type())));
  if (key == "device") return push(L, t.device().str());
  lua_pushnil(L);
  return 1;
}

int write_field(lua_State* L) {
  at::Tensor& t = self(L);
  if (lua_type(L, 2) == LUA_TNUMBER) {
    at::Tensor row = t.select(0, position(L, 2));
    if (at::Tensor* value = to_tensor(L, 3)) {
      row.copy_(*value);
    } else {
      Cursor c{L, 3, 3};
      row.fill_(Arg<at::Scalar>::get(c));
    }
    return 0;
  }
  std::string key = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "?";
  if (key == "grad") {
    at::Tensor* value = to_tensor(L, 3);
    t.mutable_grad() = value ? *value : at::Tensor();
    return 0;
  }
  if (key == "requires_grad") {
    t.requires_grad_(lua_toboolean(L, 3) != 0);
    return 0;
  }
  throw ArgError("tensors have no settable field '" + key +
                 "' (settable: grad, requires_grad, t[i])");
}

int tensor_index(lua_State* L) {
  if (lua_type(L, 2) == LUA_TSTRING) {
    lua_pushvalue(L, 2);
    lua_rawget(L, lua_upvalueindex(1));
    if (!lua_isnil(L, -1)) return 1;
    lua_pop(L, 1);
  }
  return protect(L, "tensor index", [L] { return read_field(L); });
}

int tensor_newindex(lua_State* L) {
  return protect(L, "tensor assignment", [L] { return write_field(L); });
}

}  // namespace

void add_field_metamethods(lua_State* L, int methods_index) {
  methods_index = methods_index < 0 ? lua_gettop(L) + methods_index + 1 : methods_index;
  lua_pushvalue(L, methods_index);
  lua_pushcclosure(L, tensor_index, 1);
  lua_setfield(L, methods_index, "__index");
  lua_pushcfunction(L, tensor_newindex);
  lua_setfield(L, methods_index, "__newindex");
}

}  // namespace accel::lua
