// Argument conversion: Lua values to tensors, numbers, shapes, dims and
// dtypes, and results back to Lua values.
//
// A binding's parameter types say what it accepts; `Arg<T>::get` reads one
// from the stack (registration.h generates the calls), and `push` gives a
// result back. Parameter types carry the conventions of the Lua API: `Dim`
// is a 1-based dim (negative counts from the end), `Sizes` accepts a table
// or trailing numbers, `Operand` accepts a tensor or a number.
#pragma once

extern "C" {
#include <lauxlib.h>
#include <lua.h>
}

#include <ATen/ATen.h>
#include <c10/util/MaybeOwned.h>

#include <initializer_list>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bindings/error_boundary.h"
#include "bindings/tensor_handle.h"
#include "engine/tensor_description.h"  // dtype names and shapes in messages

namespace accel::lua {

// ---- parameter types with Lua API conventions ---------------------------
struct Dim {  // 1-based, as the user wrote it; `value` is LibTorch's
  int64_t value;
};
struct Position {  // a 1-based position (narrow start, t[i]); `value` is 0-based
  int64_t value;
};
struct Sizes {  // {2, 3} or 2, 3 as the last arguments
  std::vector<int64_t> value;
};
struct Dims {  // a table of 1-based dims, or trailing dims
  std::vector<int64_t> value;
};
// A tensor, borrowed from its handle, or a number wrapped as PyTorch wraps
// scalars.
struct Operand {
  c10::MaybeOwned<at::Tensor> value;
};
struct TensorList {  // a Lua array of tensors
  std::vector<at::Tensor> value;
};
struct Options {  // an optional table of named options: {dtype=..., requires_grad=...}
  int index = 0;  // stack index of the table, 0 when absent
};
// A 1-based integer index tensor (index_select, gather, scatter...); `value`
// is LibTorch's 0-based int64 tensor. Reading it refuses float tensors and
// indices below 1; `check_bound` refuses those past a dim's size, so no
// LibTorch message with 0-based indices reaches the user.
struct IndexTensor {
  at::Tensor value;
  int argument = 0;     // 1-based argument number, for messages
  int64_t largest = 0;  // the largest 1-based index, 0 when empty
  // `dim` is LibTorch's (0-based) dim of `self` the indices address.
  void check_bound(const at::Tensor& self, int64_t dim) const;
};
struct IntList {  // one integer, or a table of integers (split sizes, roll shifts)
  std::vector<int64_t> value;
  bool single = false;  // given as one number
};
struct TensorArgs {  // the remaining arguments as tensors, or one table of them
  std::vector<at::Tensor> value;
};
// The trailing `[dims] [, keepdim] [, {options}]` of a reduction, each part
// optional (nil skips one): `t:sum()`, `t:sum(2)`, `t:sum({1, 2}, true)`,
// `t:std(1, false, {unbiased = false})`, `t:var({unbiased = false})`.
struct ReduceArgs {
  std::vector<int64_t> dims;  // 0-based; empty when none were given
  bool keepdim = false;
  Options options;
  // The dims to reduce over in `t`: the given ones, or all of them.
  std::vector<int64_t> over(const at::Tensor& t) const;
};

// The device `name` names ("cpu", "cuda:1"), checked to exist here: a GPU
// this machine lacks, or any GPU in a build without CUDA, is an error that
// starts with `what` and says so (engine/gpu.h).
at::Device usable_device(const std::string& name, const std::string& what);

int64_t to_zero_based_dim(int64_t dim, const char* what);
// Position `p` as a 0-based index into dim `dim` (LibTorch's) of `t`; one
// past either end is an error that shows the 1-based value and the size.
int64_t index_in_dim(const at::Tensor& t, int64_t dim, Position p);
// A 1-based integer index tensor as a 0-based int64 one; `what` names it in
// errors ("argument 3 (index)"): a float tensor or an index below 1 is refused.
at::Tensor zero_based_index(const at::Tensor& index, const std::string& what);
// The smallest and largest of an integer tensor's values, read with one
// host synchronisation, for the 1-based range checks; nothing for an empty
// tensor, or while a CUDA graph captures the current stream, where a host
// read would end the capture: a captured step's indices are checked by the
// kernels themselves (CUDA's device-side assert), as in PyTorch.
std::optional<std::pair<int64_t, int64_t>> index_range(const at::Tensor& t);
// Throws unless `t` has an integer dtype: `what` must be an integer tensor of
// `contents` ("1-based classes"), and a float one gets the message that says
// how to make one (number tables are float: the dtype never follows the values).
void require_integer_tensor(const at::Tensor& t, const std::string& what, const char* contents);
// LibTorch's 0-based indices (argmax, sort, nonzero...) as the 1-based ones
// Lua sees. Out of place: autograd may have saved the 0-based tensor (max
// and sort do, for their backward).
inline at::Tensor one_based_indices(const at::Tensor& indices) { return indices + 1; }

// ---- argument reading ----------------------------------------------------
struct Cursor {
  lua_State* L;
  int index;  // next stack slot to read
  int argument;  // 1-based argument number for messages
};

[[noreturn]] void throw_arg_error(const Cursor& c, const char* expected);

template <class T, class = void>
struct Arg;

// The tensor argument at the cursor, still held by its handle.
inline const at::Tensor& tensor_argument(Cursor& c) {
  const at::Tensor* t = to_tensor(c.L, c.index);
  if (!t) throw_arg_error(c, "tensor");
  ++c.index;
  return *t;
}

template <>
struct Arg<at::Tensor> {
  static at::Tensor get(Cursor& c) { return tensor_argument(c); }
};
template <>
struct Arg<double> {
  static double get(Cursor& c) {
    if (lua_type(c.L, c.index) != LUA_TNUMBER) throw_arg_error(c, "number");
    return lua_tonumber(c.L, c.index++);
  }
};
template <>
struct Arg<int64_t> {
  static int64_t get(Cursor& c) {
    if (lua_type(c.L, c.index) != LUA_TNUMBER) throw_arg_error(c, "integer");
    double v = lua_tonumber(c.L, c.index);
    if (v != static_cast<double>(static_cast<int64_t>(v))) throw_arg_error(c, "integer");
    ++c.index;
    return static_cast<int64_t>(v);
  }
};
template <>
struct Arg<bool> {
  static bool get(Cursor& c) {
    if (lua_type(c.L, c.index) != LUA_TBOOLEAN) throw_arg_error(c, "boolean");
    return lua_toboolean(c.L, c.index++) != 0;
  }
};
template <>
struct Arg<std::string> {
  static std::string get(Cursor& c) {
    if (lua_type(c.L, c.index) != LUA_TSTRING) throw_arg_error(c, "string");
    size_t len = 0;
    const char* s = lua_tolstring(c.L, c.index++, &len);
    return std::string(s, len);
  }
};
template <>
struct Arg<at::Scalar> {
  static at::Scalar get(Cursor& c) {
    int type = lua_type(c.L, c.index);
    if (type == LUA_TBOOLEAN) return at::Scalar(lua_toboolean(c.L, c.index++) != 0);
    if (type != LUA_TNUMBER) throw_arg_error(c, "number");
    return at::Scalar(lua_tonumber(c.L, c.index++));
  }
};
template <>
struct Arg<at::ScalarType> {
  static at::ScalarType get(Cursor& c) {
    if (lua_type(c.L, c.index) != LUA_TSTRING) throw_arg_error(c, "dtype");
    return parse_dtype(lua_tostring(c.L, c.index++));
  }
};
template <>
struct Arg<Dim> {
  static Dim get(Cursor& c) {
    int64_t d = Arg<int64_t>::get(c);
    return Dim{to_zero_based_dim(d, "dim")};
  }
};
template <>
struct Arg<Position> {
  static Position get(Cursor& c) {
    int64_t p = Arg<int64_t>::get(c);
    if (p == 0) throw ArgError("position 0 is invalid: positions are 1-based");
    return Position{p > 0 ? p - 1 : p};
  }
};
template <>
struct Arg<Operand> {
  static Operand get(Cursor& c);
};
template <>
struct Arg<Sizes> {
  static Sizes get(Cursor& c);
};
template <>
struct Arg<Dims> {
  static Dims get(Cursor& c);
};
template <>
struct Arg<TensorList> {
  static TensorList get(Cursor& c);
};
template <>
struct Arg<IndexTensor> {
  static IndexTensor get(Cursor& c);
};
template <>
struct Arg<IntList> {
  static IntList get(Cursor& c);
};
template <>
struct Arg<TensorArgs> {
  static TensorArgs get(Cursor& c);
};
template <>
struct Arg<ReduceArgs> {
  static ReduceArgs get(Cursor& c);
};
template <>
struct Arg<Options> {
  static Options get(Cursor& c) {
    int type = lua_type(c.L, c.index);
    if (type == LUA_TNONE || type == LUA_TNIL) return Options{0};
    if (type != LUA_TTABLE) throw_arg_error(c, "options table");
    return Options{c.index++};
  }
};
// The receiver of a method on a userdata (argument 1), which the binding
// reads itself; conversion just steps over it.
struct Receiver {};
template <>
struct Arg<Receiver> {
  static Receiver get(Cursor& c) {
    ++c.index;
    return {};
  }
};
template <>
struct Arg<lua_State*> {  // the state itself, for bindings that need it
  static lua_State* get(Cursor& c) { return c.L; }
};

// An optional argument: nil or absent gives nullopt.
template <class T>
struct Arg<c10::optional<T>> {
  static c10::optional<T> get(Cursor& c) {
    if (lua_isnoneornil(c.L, c.index)) {
      ++c.index;
      return c10::nullopt;
    }
    return Arg<T>::get(c);
  }
};

// ---- result pushing ------------------------------------------------------
// Returned by bindings that push their results themselves.
struct Pushed {
  int count;
};
inline int push(lua_State*, Pushed p) { return p.count; }
// Returned by in-place methods: the receiver (argument 1) itself, so
// `t:add_(u)` gives back t's handle rather than a new one.
struct Self {};
inline int push(lua_State* L, Self) {
  lua_pushvalue(L, 1);
  return 1;
}
inline int push(lua_State* L, at::Tensor t) {
  push_tensor(L, std::move(t));
  return 1;
}
inline int push(lua_State* L, double v) {
  lua_pushnumber(L, v);
  return 1;
}
inline int push(lua_State* L, int64_t v) {
  lua_pushnumber(L, static_cast<lua_Number>(v));
  return 1;
}
inline int push(lua_State* L, bool v) {
  lua_pushboolean(L, v);
  return 1;
}
inline int push(lua_State* L, const std::string& v) {
  lua_pushlstring(L, v.data(), v.size());
  return 1;
}
int push(lua_State* L, const std::vector<at::Tensor>& list);
int push(lua_State* L, const std::vector<int64_t>& list);
// Sets {name = number, ...} on the table on top of the stack (counters and
// statistics handed to Lua as one table).
inline void set_number_fields(lua_State* L, std::initializer_list<std::pair<const char*, double>> fields) {
  for (const auto& [name, value] : fields) {
    lua_pushnumber(L, static_cast<lua_Number>(value));
    lua_setfield(L, -2, name);
  }
}
template <class... Ts>
int push(lua_State* L, std::tuple<Ts...> values) {
  return std::apply([L](auto&&... v) { return (push(L, std::move(v)) + ...); },
                    std::move(values));
}

}  // namespace accel::lua
