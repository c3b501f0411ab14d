// Functions that make new tensors. Random ones draw from LibTorch's default
// generator, which accel.set_seed seeds.
#include "bindings/op_tables.h"

namespace accel::lua {
namespace {

using T = const at::Tensor&;
using at::Tensor;

// Shape of a nested Lua table of numbers; errors name the offending path.
void infer_shape(lua_State* L, int idx, std::vector<int64_t>& sizes, size_t depth,
                 const std::string& path) {
  size_t n = lua_objlen(L, idx);
  if (depth == sizes.size()) {
    sizes.push_back(static_cast<int64_t>(n));
  } else {
    TORCH_CHECK(static_cast<int64_t>(n) == sizes[depth], "accel.tensor: ragged table: ", path,
                " has ", n, " elements, expected ", sizes[depth]);
  }
  if (n == 0) return;
  lua_rawgeti(L, idx, 1);
  bool nested = lua_type(L, -1) == LUA_TTABLE;
  lua_pop(L, 1);
  if (!nested) return;
  for (size_t i = 1; i <= n; ++i) {
    lua_rawgeti(L, idx, static_cast<int>(i));
    TORCH_CHECK(lua_type(L, -1) == LUA_TTABLE, "accel.tensor: ", path, "[", i,
                "] is not a table like its siblings");
    infer_shape(L, lua_gettop(L), sizes, depth + 1, path + "[" + std::to_string(i) + "]");
    lua_pop(L, 1);
  }
}

// The default floating dtype (accel.set_default_dtype): what numbers make.
at::ScalarType default_float() { return c10::typeMetaToScalarType(c10::get_default_dtype()); }

// Flattens the leaves; reports whether all are booleans. Lua has one number
// type, so a table of numbers is always the default float dtype, never int64
// because its values happen to be integral (DESIGN.md, Conventions).
void flatten_leaves(lua_State* L, int idx, std::vector<double>& out, bool& boolean) {
  size_t n = lua_objlen(L, idx);
  for (size_t i = 1; i <= n; ++i) {
    lua_rawgeti(L, idx, static_cast<int>(i));
    int type = lua_type(L, -1);
    if (type == LUA_TTABLE) {
      flatten_leaves(L, lua_gettop(L), out, boolean);
    } else if (type == LUA_TNUMBER) {
      boolean = false;
      out.push_back(lua_tonumber(L, -1));
    } else if (type == LUA_TBOOLEAN) {
      out.push_back(lua_toboolean(L, -1) ? 1.0 : 0.0);
    } else {
      lua_pop(L, 1);
      TORCH_CHECK(false, "accel.tensor: element ", out.size() + 1, " is a ",
                  lua_typename(L, type), ", expected a number or boolean");
    }
    lua_pop(L, 1);
  }
}

Tensor from_lua(lua_State* L, Options opts) {
  int idx = 1;
  if (lua_type(L, idx) == LUA_TNUMBER || lua_type(L, idx) == LUA_TBOOLEAN) {
    Cursor c{L, idx, 1};
    at::Scalar s = Arg<at::Scalar>::get(c);
    at::TensorOptions base(s.isBoolean() ? at::kBool : default_float());
    return with_requires_grad(L, opts, at::scalar_tensor(s, tensor_options(L, opts, base)));
  }
  TORCH_CHECK(lua_type(L, idx) == LUA_TTABLE, "accel.tensor: expected a table or a number, got ",
              type_name_at(L, idx));
  std::vector<int64_t> sizes;
  infer_shape(L, idx, sizes, 0, "table");
  std::vector<double> values;
  bool boolean = true;
  flatten_leaves(L, idx, values, boolean);
  int64_t expected = 1;
  for (int64_t s : sizes) expected *= s;
  TORCH_CHECK(static_cast<int64_t>(values.size()) == expected,
              "accel.tensor: ragged table: found ", values.size(), " numbers for shape ", sizes);
  at::ScalarType inferred = !values.empty() && boolean ? at::kBool : default_float();
  Tensor doubles = at::from_blob(values.data(), sizes, at::kDouble);
  return with_requires_grad(
      L, opts, doubles.to(tensor_options(L, opts, at::TensorOptions(inferred)), false, true));
}

at::TensorOptions like(lua_State* L, T t, const Options& opts) {
  return tensor_options(L, opts, at::TensorOptions().dtype(t.dtype()).device(t.device()));
}

at::TensorOptions float_default(lua_State* L, const Options& opts) {
  return tensor_options(L, opts, at::TensorOptions(default_float()));
}

}  // namespace

std::vector<Binding> tensor_creation_bindings() {
  return {
      bind("tensor", [](lua_State* L) {
        // The data is argument 1 whatever it is; options, if any, follow it.
        Cursor c{L, 2, 2};
        return from_lua(L, Arg<Options>::get(c));
      }),
      bind("from_table", [](lua_State* L) {
        Cursor c{L, 2, 2};
        return from_lua(L, Arg<Options>::get(c));
      }),
      bind("zeros", [](lua_State* L, Sizes s, Options o) {
        return with_requires_grad(L, o, at::zeros(s.value, float_default(L, o)));
      }),
      bind("ones", [](lua_State* L, Sizes s, Options o) {
        return with_requires_grad(L, o, at::ones(s.value, float_default(L, o)));
      }),
      bind("empty", [](lua_State* L, Sizes s, Options o) {
        return with_requires_grad(L, o, at::empty(s.value, float_default(L, o)));
      }),
      bind("randn", [](lua_State* L, Sizes s, Options o) {
        return with_requires_grad(L, o, at::randn(s.value, float_default(L, o)));
      }),
      bind("rand", [](lua_State* L, Sizes s, Options o) {
        return with_requires_grad(L, o, at::rand(s.value, float_default(L, o)));
      }),
      // Of a boolean, a bool tensor; of a number, the default float dtype.
      bind("full", [](lua_State* L, Sizes s, at::Scalar v, Options o) {
        at::TensorOptions made =
            v.isBoolean() ? tensor_options(L, o, at::TensorOptions(at::kBool)) : float_default(L, o);
        return with_requires_grad(L, o, at::full(s.value, v, made));
      }),
      // randint(low, high, sizes): low inclusive, high exclusive, as in PyTorch.
      bind("randint", [](lua_State* L, int64_t low, int64_t high, Sizes s, Options o) {
        return at::randint(low, high, s.value, tensor_options(L, o, at::TensorOptions(at::kLong)));
      }),
      // A random permutation of 1..n (an index tensor, so 1-based).
      bind("randperm", [](lua_State* L, int64_t n, Options o) {
        return at::randperm(n, tensor_options(L, o, at::TensorOptions(at::kLong))).add_(1);
      }),
      // arange(end) or arange(start, end[, step]), then options; the end is
      // excluded. The numbers are read by hand so options may follow any
      // count of them: arange(10, {dtype = accel.float32}).
      bind("arange", [](lua_State* L) {
        Cursor c{L, 1, 1};
        std::vector<double> bounds;
        while (bounds.size() < 3 && lua_type(L, c.index) == LUA_TNUMBER) {
          bounds.push_back(Arg<double>::get(c));
          ++c.argument;
        }
        if (bounds.empty()) throw_arg_error(c, "number");
        Options o = Arg<Options>::get(c);
        bool integral = true;
        for (double v : bounds) integral = integral && v == static_cast<double>(static_cast<int64_t>(v));
        auto options = tensor_options(L, o, at::TensorOptions(integral ? at::kLong : default_float()));
        Tensor t = bounds.size() == 1 ? at::arange(bounds[0], options)
                                      : at::arange(bounds[0], bounds[1], bounds.size() == 3 ? bounds[2] : 1.0,
                                                   options);
        return with_requires_grad(L, o, t);
      }),
      // What number tables, zeros, randn, ... make when no dtype is given.
      bind("set_default_dtype", [](std::string name) {
        at::ScalarType type = parse_dtype(name);
        if (!at::isFloatingType(type)) {
          throw ArgError("the default dtype must be a floating one "
                         "(float32, float64, bfloat16 or float16), got " + name);
        }
        c10::set_default_dtype(caffe2::TypeMeta::fromScalarType(type));
      }),
      bind("get_default_dtype", []() { return dtype_text(default_float()); }),
      // Every dtype name (engine/tensor_description.h), for accel.float32 and the rest.
      bind("dtype_names", [](lua_State* L) {
        const std::vector<std::string> names = dtype_names();
        lua_createtable(L, static_cast<int>(names.size()), 0);
        for (size_t i = 0; i < names.size(); ++i) {
          lua_pushstring(L, names[i].c_str());
          lua_rawseti(L, -2, static_cast<int>(i + 1));
        }
        return Pushed{1};
      }),
      bind("linspace", [](lua_State* L, double a, double b, int64_t n, Options o) {
        return with_requires_grad(L, o, at::linspace(a, b, n, float_default(L, o)));
      }),
      bind("eye", [](lua_State* L, int64_t n, c10::optional<int64_t> m, Options o) {
        return at::eye(n, m.value_or(n), float_default(L, o));
      }),
      // *_like(t [, options]): t's shape, and its dtype and device unless
      // the options say otherwise.
      bind("zeros_like", [](lua_State* L, T t, Options o) {
        return with_requires_grad(L, o, at::zeros_like(t, like(L, t, o)));
      }),
      bind("ones_like", [](lua_State* L, T t, Options o) {
        return with_requires_grad(L, o, at::ones_like(t, like(L, t, o)));
      }),
      bind("empty_like", [](lua_State* L, T t, Options o) {
        return with_requires_grad(L, o, at::empty_like(t, like(L, t, o)));
      }),
      bind("randn_like", [](lua_State* L, T t, Options o) {
        return with_requires_grad(L, o, at::randn_like(t, like(L, t, o)));
      }),
      bind("rand_like", [](lua_State* L, T t, Options o) {
        return with_requires_grad(L, o, at::rand_like(t, like(L, t, o)));
      }),
      bind("full_like", [](lua_State* L, T t, at::Scalar v, Options o) {
        return with_requires_grad(L, o, at::full_like(t, v, like(L, t, o)));
      }),
  };
}

}  // namespace accel::lua
