// Shape ops: views and copies that rearrange, join and split tensors. Dims
// and positions are 1-based; ops that give several tensors (split, chunk,
// unbind) return them in a Lua array.
#include "bindings/op_tables.h"

namespace accel::lua {
namespace {

using T = const at::Tensor&;
using at::Tensor;

// narrow with the bounds checked in the user's 1-based terms.
Tensor narrow(T t, Dim dim, Position start, int64_t length) {
  int64_t first = index_in_dim(t, dim.value, start);
  int64_t size = t.size(at::maybe_wrap_dim(dim.value, t.dim()));
  if (length < 0 || first + length > size) {
    throw ArgError("length " + std::to_string(length) + " from position " +
                   std::to_string(first + 1) + " does not fit in dim " +
                   std::to_string(at::maybe_wrap_dim(dim.value, t.dim()) + 1) + " of size " +
                   std::to_string(size));
  }
  return t.narrow(dim.value, first, length);
}

}  // namespace

std::vector<Binding> tensor_shape_bindings() {
  return {
      bind("view", [](T t, Sizes sizes) { return t.view(sizes.value); }),
      bind("reshape", [](T t, Sizes sizes) { return t.reshape(sizes.value); }),
      bind("expand", [](T t, Sizes sizes) { return t.expand(sizes.value); }),
      bind("view_as", [](T t, T other) { return t.view_as(other); }),
      bind("reshape_as", [](T t, T other) { return t.reshape_as(other); }),
      bind("expand_as", [](T t, T other) { return t.expand_as(other); }),
      bind("permute", [](T t, Dims dims) { return t.permute(dims.value); }),
      bind("transpose", [](T t, Dim a, Dim b) { return t.transpose(a.value, b.value); }),
      bind("t", [](T t) { return t.t(); }),
      bind("movedim", [](T t, Dim from, Dim to) { return t.movedim(from.value, to.value); }),
      bind("squeeze", [](T t, c10::optional<Dim> dim) {
        return dim ? t.squeeze(dim->value) : t.squeeze();
      }),
      bind("unsqueeze", [](T t, Dim dim) { return t.unsqueeze(dim.value); }),
      bind("flatten", [](T t, c10::optional<Dim> start, c10::optional<Dim> end) {
        return t.flatten(start ? start->value : 0, end ? end->value : -1);
      }),
      bind("unflatten", [](T t, Dim dim, Sizes sizes) { return t.unflatten(dim.value, sizes.value); }),
      bind("contiguous", [](T t) { return t.contiguous(); }),
      bind("narrow", narrow),
      bind("select", [](T t, Dim dim, Position index) {
        return t.select(dim.value, index_in_dim(t, dim.value, index));
      }),

      bind("cat", [](TensorList list, c10::optional<Dim> dim) {
        return at::cat(list.value, dim ? dim->value : 0);
      }),
      bind("stack", [](TensorList list, c10::optional<Dim> dim) {
        return at::stack(list.value, dim ? dim->value : 0);
      }),
      // split(size, dim): pieces of `size` (the last may be smaller);
      // split({sizes}, dim): pieces of the given sizes.
      bind("split", [](T t, IntList sizes, c10::optional<Dim> dim) {
        int64_t d = dim ? dim->value : 0;
        return sizes.single ? t.split(sizes.value[0], d) : t.split_with_sizes(sizes.value, d);
      }),
      bind("chunk", [](T t, int64_t chunks, c10::optional<Dim> dim) {
        return t.chunk(chunks, dim ? dim->value : 0);
      }),
      bind("unbind", [](T t, c10::optional<Dim> dim) { return t.unbind(dim ? dim->value : 0); }),

      // tile(reps): PyTorch's repeat, whose name is a Lua keyword; with
      // fewer reps than dims the leading dims are kept once.
      bind("tile", [](T t, Sizes reps) { return t.tile(reps.value); }),
      bind("repeat_interleave", [](T t, int64_t repeats, c10::optional<Dim> dim) {
        return t.repeat_interleave(repeats, dim ? c10::optional<int64_t>(dim->value) : c10::nullopt);
      }),
      bind("flip", [](T t, Dims dims) { return t.flip(dims.value); }),
      // roll(shifts [, dims]): without dims the flattened tensor rolls.
      bind("roll", [](T t, IntList shifts, c10::optional<Dims> dims) {
        return t.roll(shifts.value, dims ? at::IntArrayRef(dims->value) : at::IntArrayRef());
      }),
      // The diagonal offsets of tril/triu/diag are offsets, not positions:
      // 0 is the main diagonal, as in PyTorch.
      bind("tril", [](T t, c10::optional<int64_t> diagonal) { return t.tril(diagonal.value_or(0)); }),
      bind("triu", [](T t, c10::optional<int64_t> diagonal) { return t.triu(diagonal.value_or(0)); }),
      bind("diag", [](T t, c10::optional<int64_t> diagonal) { return t.diag(diagonal.value_or(0)); }),

      bind("clone", [](T t) { return t.clone(); }),
      bind("fill_", [](Tensor t, at::Scalar v) {
        t.fill_(v);
        return Self{};
      }),
      bind("zero_", [](Tensor t) {
        t.zero_();
        return Self{};
      }),
      bind("copy_", [](Tensor t, T source) {
        t.copy_(source);
        return Self{};
      }),
  };
}

}  // namespace accel::lua
