// Reductions, scans and sorting over 1-based dims. Reductions take
// `[dims] [, keepdim] [, {options}]` (see ReduceArgs) or, where LibTorch
// reduces one dim at a time, `[dim] [, keepdim]`. Every index they return
// (max/min/median with a dim, argmax, sort, topk) is 1-based.
#include "bindings/op_tables.h"

namespace accel::lua {
namespace {

using T = const at::Tensor&;
using at::Tensor;

// `{dtype = accel.float64}`: the dtype to accumulate and return in.
c10::optional<at::ScalarType> dtype_option(lua_State* L, const Options& o) {
  check_option_names(L, o, {"dtype"});
  if (!option_present(L, o, "dtype")) return c10::nullopt;
  return parse_dtype(option_string(L, o, "dtype", ""));
}

// `{unbiased = true}` of std and var: Bessel's correction, as PyTorch.
bool unbiased_option(lua_State* L, const Options& o) {
  check_option_names(L, o, {"unbiased"});
  if (!option_present(L, o, "unbiased")) return true;
  lua_getfield(L, o.index, "unbiased");
  bool unbiased = lua_toboolean(L, -1) != 0;
  lua_pop(L, 1);
  return unbiased;
}

bool whole(const ReduceArgs& r) { return r.dims.empty() && !r.keepdim; }

// max/min/median: over everything (one value), or along a dim (values and
// 1-based indices).
template <class Whole, class AlongDim>
Pushed values_and_indices(lua_State* L, T t, const c10::optional<Dim>& dim,
                          const c10::optional<bool>& keepdim, Whole whole_fn, AlongDim along) {
  if (!dim) return Pushed{push(L, whole_fn(t))};
  auto [values, indices] = along(t, dim->value, keepdim.value_or(false));
  return Pushed{push(L, std::make_tuple(values, one_based_indices(indices)))};
}

c10::optional<int64_t> optional_dim(const c10::optional<Dim>& dim) {
  return dim ? c10::optional<int64_t>(dim->value) : c10::nullopt;
}

}  // namespace

std::vector<Binding> tensor_reduction_bindings() {
  return {
      bind("sum", [](lua_State* L, T t, ReduceArgs r) {
        auto dtype = dtype_option(L, r.options);
        return whole(r) ? at::sum(t, dtype) : at::sum(t, r.over(t), r.keepdim, dtype);
      }),
      bind("nansum", [](lua_State* L, T t, ReduceArgs r) {
        return at::nansum(t, r.over(t), r.keepdim, dtype_option(L, r.options));
      }),
      bind("mean", [](lua_State* L, T t, ReduceArgs r) {
        auto dtype = dtype_option(L, r.options);
        return whole(r) ? at::mean(t, dtype) : at::mean(t, r.over(t), r.keepdim, dtype);
      }),
      bind("prod", [](lua_State* L, T t, c10::optional<Dim> dim, c10::optional<bool> keepdim,
                      Options o) {
        auto dtype = dtype_option(L, o);
        return dim ? at::prod(t, dim->value, keepdim.value_or(false), dtype) : at::prod(t, dtype);
      }),
      bind("amax", [](T t, ReduceArgs r) { return at::amax(t, r.over(t), r.keepdim); }),
      bind("amin", [](T t, ReduceArgs r) { return at::amin(t, r.over(t), r.keepdim); }),
      bind("std", [](lua_State* L, T t, ReduceArgs r) {
        auto dims = r.over(t);
        return at::std(t, at::IntArrayRef(dims), unbiased_option(L, r.options), r.keepdim);
      }),
      bind("var", [](lua_State* L, T t, ReduceArgs r) {
        auto dims = r.over(t);
        return at::var(t, at::IntArrayRef(dims), unbiased_option(L, r.options), r.keepdim);
      }),
      // norm([p = 2] [, dims] [, keepdim]): the vector p-norm; p = math.huge
      // is the max norm.
      bind("norm", [](T t, c10::optional<double> p, ReduceArgs r) {
        auto dims = r.over(t);
        return at::linalg_vector_norm(t, p.value_or(2.0), at::IntArrayRef(dims), r.keepdim,
                                      c10::nullopt);
      }),
      bind("logsumexp", [](T t, ReduceArgs r) { return at::logsumexp(t, r.over(t), r.keepdim); }),
      bind("count_nonzero", [](T t, ReduceArgs r) { return at::count_nonzero(t, r.over(t)); }),
      bind("any", [](T t, c10::optional<Dim> dim, c10::optional<bool> keepdim) {
        return dim ? at::any(t, dim->value, keepdim.value_or(false)) : at::any(t);
      }),
      bind("all", [](T t, c10::optional<Dim> dim, c10::optional<bool> keepdim) {
        return dim ? at::all(t, dim->value, keepdim.value_or(false)) : at::all(t);
      }),

      bind("max", [](lua_State* L, T t, c10::optional<Dim> dim, c10::optional<bool> keepdim) {
        return values_and_indices(L, t, dim, keepdim, [](T x) { return at::max(x); },
                                  [](T x, int64_t d, bool k) { return at::max(x, d, k); });
      }),
      bind("min", [](lua_State* L, T t, c10::optional<Dim> dim, c10::optional<bool> keepdim) {
        return values_and_indices(L, t, dim, keepdim, [](T x) { return at::min(x); },
                                  [](T x, int64_t d, bool k) { return at::min(x, d, k); });
      }),
      // The lower median, as PyTorch's.
      bind("median", [](lua_State* L, T t, c10::optional<Dim> dim, c10::optional<bool> keepdim) {
        return values_and_indices(L, t, dim, keepdim, [](T x) { return at::median(x); },
                                  [](T x, int64_t d, bool k) { return at::median(x, d, k); });
      }),
      bind("argmax", [](T t, c10::optional<Dim> dim, c10::optional<bool> keepdim) {
        return one_based_indices(at::argmax(t, optional_dim(dim), keepdim.value_or(false)));
      }),
      bind("argmin", [](T t, c10::optional<Dim> dim, c10::optional<bool> keepdim) {
        return one_based_indices(at::argmin(t, optional_dim(dim), keepdim.value_or(false)));
      }),

      bind("cumsum", [](lua_State* L, T t, Dim dim, Options o) {
        return at::cumsum(t, dim.value, dtype_option(L, o));
      }),
      bind("cumprod", [](lua_State* L, T t, Dim dim, Options o) {
        return at::cumprod(t, dim.value, dtype_option(L, o));
      }),

      // sort([dim = -1] [, descending]) and topk(k [, dim = -1] [, largest
      // = true] [, sorted = true]) give values and 1-based indices.
      bind("sort", [](T t, c10::optional<Dim> dim, c10::optional<bool> descending) {
        auto [values, indices] = at::sort(t, dim ? dim->value : -1, descending.value_or(false));
        return std::make_tuple(values, one_based_indices(indices));
      }),
      bind("argsort", [](T t, c10::optional<Dim> dim, c10::optional<bool> descending) {
        return one_based_indices(at::argsort(t, dim ? dim->value : -1, descending.value_or(false)));
      }),
      bind("topk", [](T t, int64_t k, c10::optional<Dim> dim, c10::optional<bool> largest,
                      c10::optional<bool> sorted) {
        auto [values, indices] = at::topk(t, k, dim ? dim->value : -1, largest.value_or(true),
                                          sorted.value_or(true));
        return std::make_tuple(values, one_based_indices(indices));
      }),
  };
}

}  // namespace accel::lua
