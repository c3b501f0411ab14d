#include "bindings/value_conversion.h"

#include <sstream>

#include "engine/cuda_graph.h"
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
    throw ArgError(what + " must be an integer tensor of " + contents + ", got " + dtype_text(t.scalar_type()) +
                   " (a table of numbers makes a float tensor: ask for integers with "
                   "accel.tensor(t, {dtype = accel.int64}) or accel.LongTensor(t), or convert with x:long())");
  }
}

std::optional<std::pair<int64_t, int64_t>> index_range(const at::Tensor& t) {
  if (t.numel() == 0 || gpu::capturing()) return std::nullopt;
  auto [smallest, largest] = at::aminmax(t);
  const at::Tensor both = at::stack({smallest, largest}).to(at::kCPU, at::kLong);
  return std::make_pair(both[0].item<int64_t>(), both[1].item<int64_t>());
}

namespace {

// `index` is an integer tensor; `range` its values' (index_range).
at::Tensor zero_based(const at::Tensor& index, const std::string& what,
                      const std::optional<std::pair<int64_t, int64_t>>& range) {
  if (range && range->first < 1) {
    throw ArgError(what + ": index " + std::to_string(range->first) + " is invalid: indices are 1-based");
  }
  return index.to(at::kLong) - 1;
}

}  // namespace

at::Tensor zero_based_index(const at::Tensor& index, const std::string& what) {
  require_integer_tensor(index, what, "1-based indices");
  return zero_based(index, what, index_range(index));
}

IndexTensor Arg<IndexTensor>::get(Cursor& c) {
  at::Tensor* t = to_tensor(c.L, c.index);
  if (!t) throw_arg_error(c, "index tensor");
  ++c.index;
  IndexTensor index;
  index.argument = c.argument;
  const std::string what = "argument " + std::to_string(c.argument) + " (index)";
  require_integer_tensor(*t, what, "1-based indices");
  const auto range = index_range(*t);
  index.value = zero_based(*t, what, range);
  if (range) index.largest = range->second;
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

}  // namespace accel::lua
