// Subscripts, as in Torch7: t[{ spec1, spec2, ... }] takes one spec per
// leading dim, the dims left out taken whole:
//   a number n   selects position n and drops the dim (t[n] is t[{n}]);
//   {a, b}       keeps positions a..b, both included ({a} is {a, a}),
//   {a, b, s}    every s-th of them,
//   {}           keeps the whole dim,
//   an integer tensor of positions keeps those (one per subscript).
// Positions are 1-based and negative ones count from the end (-1 the last).
// A bool tensor as the whole subscript is a mask: t[t:lt(0)] = 0.
// Reads give views where PyTorch's would (numbers, ranges); every form can
// be assigned a number or a tensor that broadcasts to the selection.
// t:slice(dim, first, last [, step]) is the range form as a method.
#include "bindings/tensor_subscripts.h"

#include <ATen/TensorIndexing.h>

#include <string>

#include "bindings/op_tables.h"

namespace accel::lua {
namespace {

using T = const at::Tensor&;
using at::Tensor;

// The positions first..last (1-based, inclusive, negative from the end) of
// dim `d` of `t`, every `step`-th. last = first - 1 is an empty range.
// `where` names the dim in errors: after selections, t's dim numbers are
// not the user's.
Tensor range_view(T t, int64_t d, int64_t first, int64_t last, int64_t step, const std::string& where) {
  int64_t size = t.size(d);
  int64_t start = first > 0 ? first - 1 : first + size;
  int64_t stop = last > 0 ? last - 1 : last + size;
  std::string what = where + ": range {" + std::to_string(first) + ", " + std::to_string(last) + "}";
  if (first == 0 || last == 0) throw ArgError(what + " has a position 0; positions are 1-based");
  if (step < 1) throw ArgError(what + ": the step must be at least 1, got " + std::to_string(step));
  if (start < 0 || start > size || stop >= size || stop < start - 1 || (start == size && stop != start - 1)) {
    throw ArgError(what + " is out of bounds for size " + std::to_string(size));
  }
  return t.slice(d, start, stop + 1, step);
}

// A Lua integer at `idx`, or an error naming what it was meant to be.
int64_t integer_at(lua_State* L, int idx, const std::string& what) {
  double v = lua_tonumber(L, idx);
  if (lua_type(L, idx) != LUA_TNUMBER || v != static_cast<double>(static_cast<int64_t>(v))) {
    throw ArgError(what + " must be an integer, got " +
                   (lua_type(L, idx) == LUA_TNUMBER ? std::to_string(v) : type_name_at(L, idx)));
  }
  return static_cast<int64_t>(v);
}

// The selection a subscript makes: `view` after numbers and ranges, and the
// index tensor (0-based) for dim `index_dim` of it, applied last.
struct Selection {
  Tensor view;
  Tensor index;
  int64_t index_dim = -1;
};

void add_index(Selection& s, T index, int64_t d, const std::string& what) {
  if (s.index.defined()) throw ArgError(what + ": only one index tensor per subscript");
  if (index.scalar_type() == at::kBool) {
    throw ArgError(what + ": a mask must be the whole subscript, as in t[mask]");
  }
  if (index.dim() > 1) throw ArgError(what + ": an index tensor must have 1 dim, got " + std::to_string(index.dim()));
  s.index = zero_based_index(index, what);
  if (s.index.numel() > 0) {
    int64_t largest = s.index.max().item<int64_t>() + 1;
    if (largest > s.view.size(d)) {
      throw ArgError(what + ": index " + std::to_string(largest) + " is out of range for size " +
                     std::to_string(s.view.size(d)));
    }
  }
  s.index_dim = d;
}

Selection select(lua_State* L, T t, int key) {
  Selection s{t, Tensor(), -1};
  if (at::Tensor* index = to_tensor(L, key)) {
    if (t.dim() == 0) throw ArgError("cannot index a 0-dim tensor; use item()");
    add_index(s, *index, 0, "index tensor");
    return s;
  }
  int n = static_cast<int>(lua_objlen(L, key));
  int64_t d = 0;  // the dim of `view` the next spec addresses
  for (int i = 1; i <= n; ++i) {
    std::string what = "subscript entry " + std::to_string(i);
    if (d >= s.view.dim()) {
      throw ArgError("the subscript has " + std::to_string(n) + " entries but the tensor has " +
                     std::to_string(t.dim()) + " dims");
    }
    lua_rawgeti(L, key, i);
    int spec = lua_gettop(L);
    if (lua_type(L, spec) == LUA_TNUMBER) {
      int64_t position = integer_at(L, spec, what), size = s.view.size(d);
      if (position == 0) throw ArgError(what + ": position 0 is invalid: positions are 1-based");
      if (position > size || position < -size) {
        throw ArgError(what + ": position " + std::to_string(position) + " is out of range for size " +
                       std::to_string(size));
      }
      s.view = s.view.select(d, position > 0 ? position - 1 : position + size);
    } else if (at::Tensor* index = to_tensor(L, spec)) {
      add_index(s, *index, d++, what);
    } else if (lua_type(L, spec) == LUA_TTABLE) {
      int length = static_cast<int>(lua_objlen(L, spec));
      if (length > 3) throw ArgError(what + ": a range is {first, last} or {first, last, step}");
      if (length == 0) {
        ++d;
      } else {
        int64_t bounds[3] = {0, 0, 1};
        for (int j = 1; j <= length; ++j) {
          lua_rawgeti(L, spec, j);
          bounds[j - 1] = integer_at(L, -1, what + " element " + std::to_string(j));
          lua_pop(L, 1);
        }
        if (length == 1) bounds[1] = bounds[0];
        s.view = range_view(s.view, d++, bounds[0], bounds[1], bounds[2], what);
      }
    } else {
      throw ArgError(what + " is a " + type_name_at(L, spec) +
                     "; expected a position, a {first, last} range, {} or an index tensor");
    }
    lua_pop(L, 1);
  }
  return s;
}

bool is_mask(lua_State* L, int key) {
  at::Tensor* t = to_tensor(L, key);
  return t && t->scalar_type() == at::kBool;
}

}  // namespace

Tensor read_subscript(lua_State* L, T t, int key) {
  if (is_mask(L, key)) return t.index({*to_tensor(L, key)});
  Selection s = select(L, t, key);
  return s.index.defined() ? s.view.index_select(s.index_dim, s.index) : s.view;
}

void write_subscript(lua_State* L, T t, int key, int value) {
  at::Tensor* source = to_tensor(L, value);
  if (!source && lua_type(L, value) != LUA_TNUMBER && lua_type(L, value) != LUA_TBOOLEAN) {
    throw ArgError(std::string("cannot assign a ") + type_name_at(L, value) +
                   " to a tensor selection; expected a number or a tensor");
  }
  Cursor c{L, value, 3};
  if (is_mask(L, key)) {
    Tensor values = source ? *source : at::scalar_tensor(Arg<at::Scalar>::get(c), t.options());
    t.index_put_({*to_tensor(L, key)}, values.to(t.scalar_type()));
    return;
  }
  Selection s = select(L, t, key);
  if (!s.index.defined()) {
    if (source) {
      s.view.copy_(*source);
    } else {
      s.view.fill_(Arg<at::Scalar>::get(c));
    }
    return;
  }
  if (!source) {
    s.view.index_fill_(s.index_dim, s.index, Arg<at::Scalar>::get(c));
    return;
  }
  std::vector<int64_t> shape = s.view.sizes().vec();
  shape[static_cast<size_t>(s.index_dim)] = s.index.numel();
  s.view.index_copy_(s.index_dim, s.index, source->to(s.view.scalar_type()).expand(shape));
}

std::vector<Binding> tensor_subscript_bindings() {
  return {
      // slice(dim, first, last [, step]): positions first..last of dim, both
      // included, as a view; negative positions count from the end.
      bind("slice", [](T t, Dim dim, int64_t first, int64_t last, c10::optional<int64_t> step) {
        int64_t d = at::maybe_wrap_dim(dim.value, t.dim());
        return range_view(t, d, first, last, step.value_or(1), "dim " + std::to_string(d + 1));
      }),
  };
}

}  // namespace accel::lua
