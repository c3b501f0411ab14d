#include "bindings/option_table.h"

#include <cstring>

namespace accel::lua {
namespace {

// Pushes field `name` of the options table, which must be present, and
// says whether it has Lua type `type`; on a mismatch the field is popped.
bool push_field_of_type(lua_State* L, const Options& opts, const char* name, int type) {
  lua_getfield(L, opts.index, name);
  if (lua_type(L, -1) == type) return true;
  lua_pop(L, 1);
  return false;
}

// What the field holds, for "must be a number, got string".
std::string field_type(lua_State* L, const Options& opts, const char* name) {
  lua_getfield(L, opts.index, name);
  std::string got = type_name_at(L, -1);
  lua_pop(L, 1);
  return got;
}

}  // namespace

void check_option_names(lua_State* L, const Options& opts, std::initializer_list<const char*> known) {
  if (opts.index == 0) return;
  lua_pushnil(L);
  while (lua_next(L, opts.index) != 0) {
    lua_pop(L, 1);
    bool found = false;
    if (lua_type(L, -1) == LUA_TSTRING) {
      for (const char* name : known) found = found || std::strcmp(lua_tostring(L, -1), name) == 0;
    }
    if (!found) {
      std::string key = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : type_name_at(L, -1);
      lua_pop(L, 1);
      std::string list;
      for (const char* name : known) list += std::string(list.empty() ? "" : ", ") + name;
      throw ArgError("unknown option '" + key + "' (known: " + list + ")");
    }
  }
}

bool option_present(lua_State* L, const Options& opts, const char* name) {
  if (opts.index == 0) return false;
  lua_getfield(L, opts.index, name);
  bool present = !lua_isnil(L, -1);
  lua_pop(L, 1);
  return present;
}

double option_number(lua_State* L, const Options& opts, const char* name, double fallback) {
  if (!option_present(L, opts, name)) return fallback;
  if (!push_field_of_type(L, opts, name, LUA_TNUMBER)) {
    throw ArgError(std::string("option '") + name + "' must be a number, got " + field_type(L, opts, name));
  }
  double v = lua_tonumber(L, -1);
  lua_pop(L, 1);
  return v;
}

int64_t option_integer(lua_State* L, const Options& opts, const char* name, int64_t fallback) {
  const double v = option_number(L, opts, name, static_cast<double>(fallback));
  if (v != static_cast<double>(static_cast<int64_t>(v))) {
    throw ArgError(std::string("option '") + name + "' must be an integer, got " + std::to_string(v));
  }
  return static_cast<int64_t>(v);
}

bool option_boolean(lua_State* L, const Options& opts, const char* name, bool fallback) {
  if (!option_present(L, opts, name)) return fallback;
  if (!push_field_of_type(L, opts, name, LUA_TBOOLEAN)) {
    throw ArgError(std::string("option '") + name + "' must be a boolean");
  }
  bool v = lua_toboolean(L, -1) != 0;
  lua_pop(L, 1);
  return v;
}

std::string option_string(lua_State* L, const Options& opts, const char* name,
                          const std::string& fallback) {
  if (!option_present(L, opts, name)) return fallback;
  if (!push_field_of_type(L, opts, name, LUA_TSTRING)) {
    throw ArgError(std::string("option '") + name + "' must be a string, got " + field_type(L, opts, name));
  }
  std::string v = lua_tostring(L, -1);
  lua_pop(L, 1);
  return v;
}

std::vector<int64_t> option_integers(lua_State* L, const Options& opts, const char* name,
                                     std::vector<int64_t> fallback) {
  if (!option_present(L, opts, name)) return fallback;
  lua_getfield(L, opts.index, name);
  std::vector<int64_t> out;
  bool ok = true;
  // Appends the number at the top of the stack when it is integral.
  auto take_integer = [&] {
    if (lua_type(L, -1) != LUA_TNUMBER) return false;
    const double v = lua_tonumber(L, -1);
    if (v != static_cast<double>(static_cast<int64_t>(v))) return false;
    out.push_back(static_cast<int64_t>(v));
    return true;
  };
  if (lua_type(L, -1) == LUA_TTABLE) {
    size_t n = lua_objlen(L, -1);
    for (size_t i = 1; i <= n && ok; ++i) {
      lua_rawgeti(L, -1, static_cast<int>(i));
      ok = take_integer();
      lua_pop(L, 1);
    }
  } else {
    ok = take_integer();
  }
  lua_pop(L, 1);
  if (!ok || out.empty()) {
    throw ArgError(std::string("option '") + name + "' must be an integer or a table of integers");
  }
  return out;
}

c10::optional<at::Tensor> option_tensor(lua_State* L, const Options& opts, const char* name) {
  if (!option_present(L, opts, name)) return c10::nullopt;
  lua_getfield(L, opts.index, name);
  at::Tensor* t = to_tensor(L, -1);
  std::string got = type_name_at(L, -1);
  lua_pop(L, 1);  // the table still holds the tensor
  if (!t) throw ArgError(std::string("option '") + name + "' must be a tensor, got " + got);
  return *t;
}

namespace {
// Where a creation call that names no device puts its tensor. Unset, ATen's
// default (the CPU); the meta device while accel.init_empty_weights builds a
// model, so its weights are never allocated rather than allocated and moved.
c10::optional<at::Device> g_creation_device;
}  // namespace

void set_creation_device(c10::optional<at::Device> device) { g_creation_device = device; }
c10::optional<at::Device> creation_device() { return g_creation_device; }

at::TensorOptions tensor_options(lua_State* L, const Options& opts, at::TensorOptions base) {
  if (g_creation_device && !base.has_device()) base = base.device(*g_creation_device);
  if (opts.index == 0) return base;
  lua_getfield(L, opts.index, "dtype");
  if (!lua_isnil(L, -1)) {
    if (lua_type(L, -1) != LUA_TSTRING) throw ArgError("option 'dtype' must be a dtype");
    base = base.dtype(parse_dtype(lua_tostring(L, -1)));
  }
  lua_getfield(L, opts.index, "device");
  if (!lua_isnil(L, -1)) {
    if (lua_type(L, -1) != LUA_TSTRING) throw ArgError("option 'device' must be a string");
    base = base.device(usable_device(lua_tostring(L, -1), "option 'device'"));
  }
  lua_pop(L, 2);
  return base;
}

at::Tensor with_requires_grad(lua_State* L, const Options& opts, at::Tensor t) {
  if (option_present(L, opts, "requires_grad")) {
    lua_getfield(L, opts.index, "requires_grad");
    t.requires_grad_(lua_toboolean(L, -1) != 0);
    lua_pop(L, 1);
  }
  return t;
}

}  // namespace accel::lua
