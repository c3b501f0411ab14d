#include "bindings/lua_support.h"

#include <c10/util/Exception.h>

#include <cstdio>
#include <cstring>
#include <sstream>

#include "bindings/error_log.h"
#include "engine/comm/communicator.h"
#include "engine/gpu.h"

namespace accel::lua {

at::Device usable_device(const std::string& name, const std::string& what) {
  at::Device device(name);
  if (device.is_cuda()) gpu::checked_index(device.has_index() ? device.index() : -1, what);
  return device;
}

void throw_arg_error(const Cursor& c, const char* expected) {
  std::ostringstream msg;
  msg << "argument " << c.argument << ": expected " << expected << ", got "
      << type_name_at(c.L, c.index);
  if (lua_type(c.L, c.index) == LUA_TNUMBER) msg << " " << lua_tonumber(c.L, c.index);
  if (lua_type(c.L, c.index) == LUA_TSTRING) msg << " '" << lua_tostring(c.L, c.index) << "'";
  throw ArgError(msg.str());
}

int64_t to_zero_based_dim(int64_t dim, const char* what) {
  if (dim == 0) {
    throw ArgError(std::string(what) + " 0 is invalid: dims are 1-based (1 is the first, -1 the last)");
  }
  return dim > 0 ? dim - 1 : dim;
}

int64_t index_in_dim(const at::Tensor& t, int64_t dim, Position p) {
  if (t.dim() == 0) throw ArgError("cannot index a 0-dim tensor; use item()");
  int64_t d = at::maybe_wrap_dim(dim, t.dim());
  int64_t size = t.size(d);
  if (p.value < -size || p.value >= size) {
    int64_t given = p.value >= 0 ? p.value + 1 : p.value;
    throw ArgError("index " + std::to_string(given) + " is out of range for dim " +
                   std::to_string(d + 1) + " of size " + std::to_string(size) +
                   " (indices are 1-based; -1 is the last)");
  }
  return p.value < 0 ? p.value + size : p.value;
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
    if (n == 0) {
      // An options table ({unbiased = false}) where sizes or dims belong
      // would otherwise read as an empty list and be ignored.
      lua_pushnil(L);
      if (lua_next(L, c.index) != 0) {
        lua_pop(L, 2);
        throw ArgError("argument " + std::to_string(c.argument) + ": expected " + expected +
                       ", got a table with named fields");
      }
    }
    out.reserve(n);
    for (size_t i = 1; i <= n; ++i) {
      lua_rawgeti(L, c.index, static_cast<int>(i));
      double v = lua_tonumber(L, -1);
      bool integral = lua_type(L, -1) == LUA_TNUMBER && v == static_cast<double>(static_cast<int64_t>(v));
      lua_pop(L, 1);
      if (!integral) {
        throw ArgError("argument " + std::to_string(c.argument) + ": expected " + expected +
                       ", element " + std::to_string(i) + " is not an integer");
      }
      out.push_back(static_cast<int64_t>(v));
    }
    ++c.index;
    return out;
  }
  while (lua_type(L, c.index) == LUA_TNUMBER) {
    double v = lua_tonumber(L, c.index);
    if (v != static_cast<double>(static_cast<int64_t>(v))) throw_arg_error(c, "integer");
    out.push_back(static_cast<int64_t>(v));
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
    return Operand{c10::MaybeOwned<at::Tensor>::borrowed(*t)};
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
  return Operand{c10::MaybeOwned<at::Tensor>::owned(std::move(wrapped))};
}

Sizes Arg<Sizes>::get(Cursor& c) { return Sizes{read_integers(c, "sizes")}; }

Dims Arg<Dims>::get(Cursor& c) {
  std::vector<int64_t> dims = read_integers(c, "dims");
  for (auto& d : dims) d = to_zero_based_dim(d, "dim");
  return Dims{std::move(dims)};
}

void require_integer_tensor(const at::Tensor& t, const std::string& what, const char* contents) {
  if (t.is_floating_point() || t.is_complex() || t.scalar_type() == at::kBool) {
    throw ArgError(what + " must be an integer tensor of " + contents + ", got " + dtype_name(t.scalar_type()) +
                   " (a table of numbers makes a float tensor: ask for integers with "
                   "accel.tensor(t, {dtype = accel.int64}) or accel.LongTensor(t), or convert with x:long())");
  }
}

at::Tensor zero_based_index(const at::Tensor& index, const std::string& what) {
  require_integer_tensor(index, what, "1-based indices");
  if (index.numel() > 0) {
    int64_t smallest = index.min().item<int64_t>();
    if (smallest < 1) {
      throw ArgError(what + ": index " + std::to_string(smallest) +
                     " is invalid: indices are 1-based");
    }
  }
  return index.to(at::kLong) - 1;
}

IndexTensor Arg<IndexTensor>::get(Cursor& c) {
  at::Tensor* t = to_tensor(c.L, c.index);
  if (!t) throw_arg_error(c, "index tensor");
  ++c.index;
  IndexTensor index;
  index.argument = c.argument;
  index.value = zero_based_index(*t, "argument " + std::to_string(c.argument) + " (index)");
  if (t->numel() > 0) index.largest = t->max().item<int64_t>();
  return index;
}

void IndexTensor::check_bound(const at::Tensor& self, int64_t dim) const {
  int64_t wrapped = at::maybe_wrap_dim(dim, self.dim() == 0 ? 1 : self.dim());
  int64_t size = self.dim() == 0 ? 1 : self.size(wrapped);
  if (largest > size) {
    throw ArgError("argument " + std::to_string(argument) + " (index): index " +
                   std::to_string(largest) + " is out of range for dim " +
                   std::to_string(wrapped + 1) + " of size " + std::to_string(size));
  }
}

IntList Arg<IntList>::get(Cursor& c) {
  if (lua_type(c.L, c.index) == LUA_TNUMBER) {
    return IntList{{Arg<int64_t>::get(c)}, true};
  }
  if (lua_type(c.L, c.index) != LUA_TTABLE) throw_arg_error(c, "integer or table of integers");
  return IntList{read_integers(c, "table of integers"), false};
}

TensorArgs Arg<TensorArgs>::get(Cursor& c) {
  if (lua_type(c.L, c.index) == LUA_TTABLE && !to_tensor(c.L, c.index)) {
    return TensorArgs{Arg<TensorList>::get(c).value};
  }
  TensorArgs args;
  for (int top = lua_gettop(c.L); c.index <= top; ++c.argument) {
    args.value.push_back(Arg<at::Tensor>::get(c));
  }
  return args;
}

namespace {

// A table with an array part, or an empty one, lists dims; one with only
// named fields is an options table.
bool is_list(lua_State* L, int idx) {
  if (lua_objlen(L, idx) > 0) return true;
  lua_pushnil(L);
  if (lua_next(L, idx) == 0) return true;
  lua_pop(L, 2);
  return false;
}

}  // namespace

ReduceArgs Arg<ReduceArgs>::get(Cursor& c) {
  ReduceArgs r;
  lua_State* L = c.L;
  int top = lua_gettop(L);
  auto skip_nil = [&] {  // a nil placeholder, when more arguments follow
    if (c.index < top && lua_isnil(L, c.index)) {
      ++c.index;
      ++c.argument;
      return true;
    }
    return false;
  };
  int type = lua_type(L, c.index);
  if (type == LUA_TNUMBER || (type == LUA_TTABLE && !to_tensor(L, c.index) && is_list(L, c.index))) {
    r.dims = Arg<Dims>::get(c).value;
    ++c.argument;
  } else {
    skip_nil();
  }
  if (lua_type(L, c.index) == LUA_TBOOLEAN) {
    r.keepdim = lua_toboolean(L, c.index++) != 0;
    ++c.argument;
  } else {
    skip_nil();
  }
  type = lua_type(L, c.index);
  if (type == LUA_TTABLE && !to_tensor(L, c.index)) {
    r.options = Options{c.index++};
  } else if (type != LUA_TNONE && type != LUA_TNIL) {
    throw_arg_error(c, "dims, keepdim or an options table");
  }
  return r;
}

std::vector<int64_t> ReduceArgs::over(const at::Tensor& t) const {
  if (!dims.empty()) return dims;
  std::vector<int64_t> all(static_cast<size_t>(t.dim()));
  for (int64_t d = 0; d < t.dim(); ++d) all[static_cast<size_t>(d)] = d;
  return all;
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

at::Tensor tensor_option(lua_State* L, const Options& opts, const char* name) {
  if (!option_present(L, opts, name)) return at::Tensor();
  lua_getfield(L, opts.index, name);
  at::Tensor* t = to_tensor(L, -1);
  std::string got = type_name_at(L, -1);
  lua_pop(L, 1);  // the table still holds the tensor
  if (!t) throw ArgError(std::string("option '") + name + "' must be a tensor, got " + got);
  return *t;
}

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

namespace {

// LibTorch reports a bad dim 0-based ("expected to be in range of [-2, 1],
// but got 4"); the user wrote it 1-based, so say it their way.
std::string with_one_based_dims(const std::string& message) {
  const char* found = std::strstr(message.c_str(), "Dimension out of range (expected to be in range of [");
  long long low = 0, high = 0, got = 0;
  if (!found || std::sscanf(found, "Dimension out of range (expected to be in range of [%lld, %lld], but got %lld)",
                            &low, &high, &got) != 3) {
    return message;
  }
  long long dims = high + 1;
  std::ostringstream out;
  out << "dim " << (got >= 0 ? got + 1 : got) << " is out of range for a tensor with " << dims
      << (dims == 1 ? " dim" : " dims") << " (dims are 1-based: 1 to " << dims << ", or " << -dims
      << " to -1 from the end)";
  return out.str();
}

}  // namespace

std::string describe_exception(const std::exception& e) {
  if (dynamic_cast<const CollectiveError*>(&e)) on_collective_failure(e.what());
  if (const auto* torch_error = dynamic_cast<const c10::Error*>(&e)) {
    log_cpp_backtrace(torch_error->what());
    return with_one_based_dims(torch_error->what_without_backtrace());
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
