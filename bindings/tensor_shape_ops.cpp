// Shape and selection ops. Dims, positions and index tensors are 1-based.
#include "bindings/op_tables.h"

namespace accel::lua {
namespace {

using T = const at::Tensor&;
using at::Tensor;

// A 1-based index tensor as LibTorch's 0-based one, refusing 0 and below.
Tensor zero_based_index(T index, const char* what) {
  TORCH_CHECK(!index.is_floating_point(), what, " must be an integer tensor, got ",
              index.scalar_type());
  if (index.numel() > 0) {
    int64_t smallest = index.min().item<int64_t>();
    TORCH_CHECK(smallest >= 1, what, " are 1-based, but one is ", smallest);
  }
  return index - 1;
}

}  // namespace

std::vector<Binding> tensor_shape_bindings() {
  return {
      bind("view", [](T t, Sizes sizes) { return t.view(sizes.value); }),
      bind("reshape", [](T t, Sizes sizes) { return t.reshape(sizes.value); }),
      bind("expand", [](T t, Sizes sizes) { return t.expand(sizes.value); }),
      bind("permute", [](T t, Dims dims) { return t.permute(dims.value); }),
      bind("transpose", [](T t, Dim a, Dim b) { return t.transpose(a.value, b.value); }),
      bind("t", [](T t) { return t.t(); }),
      bind("squeeze", [](T t, c10::optional<Dim> dim) {
        return dim ? t.squeeze(dim->value) : t.squeeze();
      }),
      bind("unsqueeze", [](T t, Dim dim) { return t.unsqueeze(dim.value); }),
      bind("flatten", [](T t, c10::optional<Dim> start, c10::optional<Dim> end) {
        return t.flatten(start ? start->value : 0, end ? end->value : -1);
      }),
      bind("contiguous", [](T t) { return t.contiguous(); }),
      bind("narrow", [](T t, Dim dim, Position start, int64_t length) {
        return t.narrow(dim.value, start.value, length);
      }),
      bind("select", [](T t, Dim dim, Position index) { return t.select(dim.value, index.value); }),
      bind("index_select", [](T t, Dim dim, T index) {
        return t.index_select(dim.value, zero_based_index(index, "index_select indices"));
      }),
      bind("cat", [](TensorList list, c10::optional<Dim> dim) {
        return at::cat(list.value, dim ? dim->value : 0);
      }),
      bind("stack", [](TensorList list, c10::optional<Dim> dim) {
        return at::stack(list.value, dim ? dim->value : 0);
      }),
      bind("clone", [](T t) { return t.clone(); }),
      bind("fill_", [](Tensor t, double v) { return t.fill_(v); }),
      bind("zero_", [](Tensor t) { return t.zero_(); }),
      bind("copy_", [](Tensor t, T source) { return t.copy_(source); }),
  };
}

}  // namespace accel::lua
