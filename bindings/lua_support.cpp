#include "bindings/lua_support.h"

#include <c10/util/Exception.h>

#include <cstring>
#include <sstream>

#include "bindings/error_log.h"
#include "engine/communicator.h"

namespace accel::lua {

void throw_arg_error(const Cursor& c, const char* expected) {
  std::ostringstream msg;
  msg << "argument " << c.argument << ": expected " << expected << ", got "
      << type_name_at(c.L, c.index);
  if (lua_type(c.L, c.index) == LUA_TNUMBER) msg << " " << lua_tonumber(c.L, c.index);
  throw ArgError(msg.str());
}

int64_t to_zero_based_dim(int64_t dim, const char* what) {
  if (dim == 0) {
    throw ArgError(std::string(what) + " 0 is invalid: dims are 1-based (1 is the first, -1 the last)");
  }
  return dim > 0 ? dim - 1 : dim;
}

namespace {

struct DtypeName {
  const char* name;
  at::ScalarType type;
};

constexpr DtypeName kDtypes[] = {
    {"float32", at::kFloat},   {"float64", at::kDouble}, {"bfloat16", at::kBFloat16},
    {"float16", at::kHalf},    {"int64", at::kLong},     {"int32", at::kInt},
    {"int16", at::kShort},     {"int8", at::kChar},      {"uint8", at::kByte},
    {"bool", at::kBool},
};

// Reads integers from a table at `index`, or from consecutive numbers.
std::vector<int64_t> read_integers(Cursor& c, const char* expected) {
  std::vector<int64_t> out;
  lua_State* L = c.L;
  if (lua_type(L, c.index) == LUA_TTABLE) {
    size_t n = lua_objlen(L, c.index);
    out.reserve(n);
    for (size_t i = 1; i <= n; ++i) {
      lua_rawgeti(L, c.index, static_cast<int>(i));
      if (lua_type(L, -1) != LUA_TNUMBER) {
        lua_pop(L, 1);
        throw ArgError("argument " + std::to_string(c.argument) + ": expected " + expected +
                       ", element " + std::to_string(i) + " is not a number");
      }
      out.push_back(static_cast<int64_t>(lua_tonumber(L, -1)));
      lua_pop(L, 1);
    }
    ++c.index;
    return out;
  }
  while (lua_type(L, c.index) == LUA_TNUMBER) {
    out.push_back(static_cast<int64_t>(lua_tonumber(L, c.index)));
    ++c.index;
  }
  if (out.empty()) throw_arg_error(c, expected);
  return out;
}

}  // namespace

at::ScalarType parse_dtype(const std::string& name) {
  for (const auto& d : kDtypes) {
    if (name == d.name) return d.type;
  }
  std::string known;
  for (const auto& d : kDtypes) known += std::string(known.empty() ? "" : ", ") + d.name;
  throw ArgError("unknown dtype '" + name + "' (known: " + known + ")");
}

const char* dtype_name(at::ScalarType type) {
  for (const auto& d : kDtypes) {
    if (d.type == type) return d.name;
  }
  return c10::toString(type);
}

Operand Arg<Operand>::get(Cursor& c) {
  if (at::Tensor* t = to_tensor(c.L, c.index)) {
    ++c.index;
    return Operand{*t};
  }
  int type = lua_type(c.L, c.index);
  at::Scalar s;
  if (type == LUA_TNUMBER) {
    double v = lua_tonumber(c.L, c.index);
    // Integral numbers stay integral so int tensors keep their dtype, as in PyTorch.
    if (v == static_cast<double>(static_cast<int64_t>(v))) {
      s = at::Scalar(static_cast<int64_t>(v));
    } else {
      s = at::Scalar(v);
    }
  } else if (type == LUA_TBOOLEAN) {
    s = at::Scalar(lua_toboolean(c.L, c.index) != 0);
  } else {
    throw_arg_error(c, "tensor or number");
  }
  ++c.index;
  at::Tensor wrapped = c10::scalar_to_tensor(s);
  wrapped.unsafeGetTensorImpl()->set_wrapped_number(true);
  return Operand{std::move(wrapped)};
}

Sizes Arg<Sizes>::get(Cursor& c) { return Sizes{read_integers(c, "sizes")}; }

Dims Arg<Dims>::get(Cursor& c) {
  std::vector<int64_t> dims = read_integers(c, "dims");
  for (auto& d : dims) d = to_zero_based_dim(d, "dim");
  return Dims{std::move(dims)};
}

TensorList Arg<TensorList>::get(Cursor& c) {
  lua_State* L = c.L;
  if (lua_type(L, c.index) != LUA_TTABLE) throw_arg_error(c, "table of tensors");
  size_t n = lua_objlen(L, c.index);
  TensorList list;
  list.value.reserve(n);
  for (size_t i = 1; i <= n; ++i) {
    lua_rawgeti(L, c.index, static_cast<int>(i));
    at::Tensor* t = to_tensor(L, -1);
    if (!t) {
      std::string got = type_name_at(L, -1);
      lua_pop(L, 1);
      throw ArgError("argument " + std::to_string(c.argument) + ": element " +
                     std::to_string(i) + " is a " + got + ", expected a tensor");
    }
    list.value.push_back(*t);
    lua_pop(L, 1);
  }
  ++c.index;
  return list;
}

at::TensorOptions tensor_options(lua_State* L, const Options& opts, at::TensorOptions base) {
  if (opts.index == 0) return base;
  lua_getfield(L, opts.index, "dtype");
  if (!lua_isnil(L, -1)) {
    if (lua_type(L, -1) != LUA_TSTRING) throw ArgError("option 'dtype' must be a dtype");
    base = base.dtype(parse_dtype(lua_tostring(L, -1)));
  }
  lua_getfield(L, opts.index, "device");
  if (!lua_isnil(L, -1)) {
    if (lua_type(L, -1) != LUA_TSTRING) throw ArgError("option 'device' must be a string");
    base = base.device(at::Device(lua_tostring(L, -1)));
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

bool option_present(lua_State* L, const Options& opts, const char* name) {
  if (opts.index == 0) return false;
  lua_getfield(L, opts.index, name);
  bool present = !lua_isnil(L, -1);
  lua_pop(L, 1);
  return present;
}

double option_number(lua_State* L, const Options& opts, const char* name, double fallback) {
  if (!option_present(L, opts, name)) return fallback;
  lua_getfield(L, opts.index, name);
  if (lua_type(L, -1) != LUA_TNUMBER) {
    std::string got = type_name_at(L, -1);
    lua_pop(L, 1);
    throw ArgError(std::string("option '") + name + "' must be a number, got " + got);
  }
  double v = lua_tonumber(L, -1);
  lua_pop(L, 1);
  return v;
}

std::string option_string(lua_State* L, const Options& opts, const char* name,
                          const std::string& fallback) {
  if (!option_present(L, opts, name)) return fallback;
  lua_getfield(L, opts.index, name);
  if (lua_type(L, -1) != LUA_TSTRING) {
    std::string got = type_name_at(L, -1);
    lua_pop(L, 1);
    throw ArgError(std::string("option '") + name + "' must be a string, got " + got);
  }
  std::string v = lua_tostring(L, -1);
  lua_pop(L, 1);
  return v;
}

int push(lua_State* L, const std::vector<at::Tensor>& list) {
  lua_createtable(L, static_cast<int>(list.size()), 0);
  for (size_t i = 0; i < list.size(); ++i) {
    push_tensor(L, list[i]);
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  return 1;
}

int push(lua_State* L, const std::vector<int64_t>& list) {
  lua_createtable(L, static_cast<int>(list.size()), 0);
  for (size_t i = 0; i < list.size(); ++i) {
    lua_pushnumber(L, static_cast<lua_Number>(list[i]));
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  return 1;
}

std::string describe_exception(const std::exception& e) {
  if (dynamic_cast<const CollectiveError*>(&e)) on_collective_failure(e.what());
  if (const auto* torch_error = dynamic_cast<const c10::Error*>(&e)) {
    log_cpp_backtrace(torch_error->what());
    return torch_error->what_without_backtrace();
  }
  return e.what();
}

namespace {

// Describes the call's arguments so shape errors always show the shapes.
std::string describe_arguments(lua_State* L) {
  std::ostringstream out;
  int top = lua_gettop(L);
  for (int i = 1; i <= top; ++i) {
    if (i > 1) out << ", ";
    if (at::Tensor* t = to_tensor(L, i)) {
      if (!t->defined()) {
        out << "undefined tensor";
        continue;
      }
      out << dtype_name(t->scalar_type()) << "[";
      for (int64_t d = 0; d < t->dim(); ++d) out << (d ? "x" : "") << t->size(d);
      out << "]";
    } else if (lua_type(L, i) == LUA_TNUMBER) {
      out << lua_tonumber(L, i);
    } else if (lua_type(L, i) == LUA_TSTRING) {
      out << "'" << lua_tostring(L, i) << "'";
    } else {
      out << type_name_at(L, i);
    }
  }
  return out.str();
}

}  // namespace

namespace {
std::string& library_source_prefix() {
  static std::string prefix;
  return prefix;
}
}  // namespace

void set_library_source_prefix(const std::string& lua_dir) {
  library_source_prefix() = "@" + lua_dir;
}

void push_caller_location(lua_State* L) {
  const std::string& library = library_source_prefix();
  lua_Debug ar;
  for (int level = 1; lua_getstack(L, level, &ar); ++level) {
    lua_getinfo(L, "Sl", &ar);
    if (ar.currentline <= 0) continue;  // a C function
    if (!library.empty() && std::strncmp(ar.source, library.data(), library.size()) == 0) continue;
    lua_pushfstring(L, "%s:%d: ", ar.short_src, ar.currentline);
    return;
  }
  luaL_where(L, 1);
}

void push_error(lua_State* L, const char* name, const std::string& message) {
  std::string text = std::string(name) + ": " + message;
  // LibTorch messages often end in a newline; keep the Lua message tidy.
  while (!text.empty() && text.back() == '\n') text.pop_back();
  if (lua_gettop(L) > 0) text += " (called with: " + describe_arguments(L) + ")";
  push_caller_location(L);
  lua_pushlstring(L, text.data(), text.size());
  lua_concat(L, 2);
}

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
