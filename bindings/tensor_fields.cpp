// `t.field`, `t[i]`, `t[{...}]` and their assignments: the tensor's __index
// and __newindex (subscripts are in tensor_subscripts.cpp). Method lookup
// comes first and stays a single table read.
#include "bindings/tensor_fields.h"

#include <cstring>

#include "bindings/value_conversion.h"
#include "bindings/tensor_subscripts.h"

namespace accel::lua {
namespace {

at::Tensor& self(lua_State* L) {
  at::Tensor* t = to_tensor(L, 1);
  if (!t) throw ArgError("expected a tensor on the left of '.' or '['");
  return *t;
}

// Row `idx`'s 1-based position in dim 1 of t, checked against its size.
int64_t row(lua_State* L, const at::Tensor& t, int idx) {
  Cursor c{L, idx, 2};
  return index_in_dim(t, 0, Arg<Position>::get(c));
}

bool is_subscript(lua_State* L, int idx) { return lua_type(L, idx) == LUA_TTABLE || to_tensor(L, idx); }

int read_field(lua_State* L) {
  at::Tensor& t = self(L);
  if (lua_type(L, 2) == LUA_TNUMBER) return push(L, t.select(0, row(L, t, 2)));
  if (is_subscript(L, 2)) return push(L, read_subscript(L, t, 2));
  if (lua_type(L, 2) != LUA_TSTRING) {
    throw ArgError(std::string("cannot index a tensor with a ") + type_name_at(L, 2) +
                   " (expected a position, a subscript table, an index or mask tensor, or a field name)");
  }
  std::string key = lua_tostring(L, 2);
  if (key == "grad") return push(L, t.grad());
  if (key == "requires_grad") return push(L, t.requires_grad());
  if (key == "is_leaf") return push(L, t.is_leaf());
  if (key == "shape") return push(L, t.sizes().vec());
  if (key == "dtype") return push(L, dtype_text(t.scalar_type()));
  if (key == "device") return push(L, t.device().str());
  if (key == "is_cuda") return push(L, t.is_cuda());
  lua_pushnil(L);
  return 1;
}

int write_field(lua_State* L) {
  at::Tensor& t = self(L);
  if (lua_type(L, 2) == LUA_TNUMBER) {
    at::Tensor selected = t.select(0, row(L, t, 2));
    if (at::Tensor* value = to_tensor(L, 3)) {
      selected.copy_(*value);
    } else {
      Cursor c{L, 3, 3};
      selected.fill_(Arg<at::Scalar>::get(c));
    }
    return 0;
  }
  if (is_subscript(L, 2)) {
    write_subscript(L, t, 2, 3);
    return 0;
  }
  std::string key = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "?";
  if (key == "grad") {
    at::Tensor* value = to_tensor(L, 3);
    // As PyTorch's setter: backward accumulates into the gradient, which
    // must be able to hold the tensor's own gradient.
    if (value && value->defined()) {
      TORCH_CHECK(value->device() == t.device(), "assigned grad is on ", value->device(),
                  ", but the tensor is on ", t.device());
      TORCH_CHECK(value->scalar_type() == t.scalar_type(), "assigned grad is ", dtype_text(value->scalar_type()),
                  ", but the tensor is ", dtype_text(t.scalar_type()));
      TORCH_CHECK(value->sizes() == t.sizes(), "assigned grad has shape ", shape_text(value->sizes()),
                  ", but the tensor has shape ", shape_text(t.sizes()));
    }
    t.mutable_grad() = value ? *value : at::Tensor();
    return 0;
  }
  if (key == "requires_grad") {
    t.requires_grad_(lua_toboolean(L, 3) != 0);
    return 0;
  }
  throw ArgError("tensors have no settable field '" + key +
                 "' (settable: grad, requires_grad, t[i], t[{...}], t[mask])");
}

int tensor_read_field(lua_State* L) {
  return protect(L, "tensor index", [L] { return read_field(L); });
}

// The lookup is Lua so that LuaJIT compiles `t:method(...)` into a table
// read; only fields and subscripts call into C (bench/RESULTS.md's git history: 220 fewer
// instructions per method call than a C __index). read_field is a tail
// call, so an error names the recipe line that indexed, not this chunk.
constexpr const char* kIndexChunk = R"(
local methods, read_field = ...
return function(t, key)
  local method = methods[key]
  if method ~= nil then return method end
  return read_field(t, key)
end)";

int tensor_newindex(lua_State* L) {
  return protect(L, "tensor assignment", [L] { return write_field(L); });
}

}  // namespace

void add_field_metamethods(lua_State* L, int methods_index) {
  methods_index = methods_index < 0 ? lua_gettop(L) + methods_index + 1 : methods_index;
  if (luaL_loadbuffer(L, kIndexChunk, std::strlen(kIndexChunk), "=tensor __index") != 0) {
    lua_error(L);
  }
  lua_pushvalue(L, methods_index);
  lua_pushcfunction(L, tensor_read_field);
  lua_call(L, 2, 1);
  lua_setfield(L, methods_index, "__index");
  lua_pushcfunction(L, tensor_newindex);
  lua_setfield(L, methods_index, "__newindex");
}

}  // namespace accel::lua
