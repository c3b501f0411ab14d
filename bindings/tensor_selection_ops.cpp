// Selection by index tensors and masks. Index tensors are 1-based
// (IndexTensor converts them and checks their range against the dim they
// address); indices these ops return (nonzero) are 1-based too.
#include "bindings/op_tables.h"

namespace accel::lua {
namespace {

using T = const at::Tensor&;
using at::Tensor;

bool is_number(const Operand& o) { return o.value->unsafeGetTensorImpl()->is_wrapped_number(); }

// The checked, 0-based index for dim `dim` of `t`.
const Tensor& checked(T t, const Dim& dim, const IndexTensor& index) {
  index.check_bound(t, dim.value);
  return index.value;
}

Tensor scatter(T t, Dim dim, IndexTensor index, Operand src) {
  const Tensor& i = checked(t, dim, index);
  return is_number(src) ? at::scatter(t, dim.value, i, src.value->item())
                        : at::scatter(t, dim.value, i, *src.value);
}

Tensor masked_fill(T t, T mask, Operand value) {
  return is_number(value) ? at::masked_fill(t, mask, value.value->item())
                          : at::masked_fill(t, mask, *value.value);
}

}  // namespace

std::vector<Binding> tensor_selection_bindings() {
  return {
      bind("index_select", [](T t, Dim dim, IndexTensor index) {
        return t.index_select(dim.value, checked(t, dim, index));
      }),
      // gather(dim, index): out[i][j] = t[index[i][j]][j] for dim 1.
      bind("gather", [](T t, Dim dim, IndexTensor index) {
        return t.gather(dim.value, checked(t, dim, index));
      }),
      // scatter(dim, index, src): a copy of t with src's values (or a
      // number) written where index says; scatter_add adds instead.
      bind("scatter", scatter),
      bind("scatter_add", [](T t, Dim dim, IndexTensor index, T src) {
        return t.scatter_add(dim.value, checked(t, dim, index), src);
      }),
      bind("index_add", [](T t, Dim dim, IndexTensor index, T source) {
        return t.index_add(dim.value, checked(t, dim, index), source);
      }),
      bind("index_copy", [](T t, Dim dim, IndexTensor index, T source) {
        return t.index_copy(dim.value, checked(t, dim, index), source);
      }),
      bind("index_fill", [](T t, Dim dim, IndexTensor index, at::Scalar value) {
        return t.index_fill(dim.value, checked(t, dim, index), value);
      }),
      bind("masked_fill", masked_fill),
      bind("masked_select", [](T t, T mask) { return t.masked_select(mask); }),
      // The 1-based positions of the non-zero elements, one row each.
      bind("nonzero", [](T t) { return one_based_indices(t.nonzero()); }),

      bind("scatter_", [](Tensor t, Dim dim, IndexTensor index, Operand src) {
        const Tensor& i = checked(t, dim, index);
        if (is_number(src)) {
          t.scatter_(dim.value, i, src.value->item());
        } else {
          t.scatter_(dim.value, i, *src.value);
        }
        return Self{};
      }),
      bind("scatter_add_", [](Tensor t, Dim dim, IndexTensor index, T src) {
        t.scatter_add_(dim.value, checked(t, dim, index), src);
        return Self{};
      }),
      bind("index_add_", [](Tensor t, Dim dim, IndexTensor index, T source) {
        t.index_add_(dim.value, checked(t, dim, index), source);
        return Self{};
      }),
      bind("index_copy_", [](Tensor t, Dim dim, IndexTensor index, T source) {
        t.index_copy_(dim.value, checked(t, dim, index), source);
        return Self{};
      }),
      bind("index_fill_", [](Tensor t, Dim dim, IndexTensor index, at::Scalar value) {
        t.index_fill_(dim.value, checked(t, dim, index), value);
        return Self{};
      }),
      bind("masked_fill_", [](Tensor t, T mask, Operand value) {
        if (is_number(value)) {
          t.masked_fill_(mask, value.value->item());
        } else {
          t.masked_fill_(mask, *value.value);
        }
        return Self{};
      }),
  };
}

}  // namespace accel::lua
