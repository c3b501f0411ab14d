// Random sampling into and from tensors. Every draw comes from LibTorch's
// default generator, which accel.set_seed seeds, so a seeded recipe draws
// the same numbers as PyTorch after torch.manual_seed with the same seed.
#include "bindings/op_tables.h"

namespace accel::lua {
namespace {

using T = const at::Tensor&;
using at::Tensor;

}  // namespace

std::vector<Binding> tensor_random_bindings() {
  return {
      bind("normal_", [](Tensor t, c10::optional<double> mean, c10::optional<double> std) {
        t.normal_(mean.value_or(0.0), std.value_or(1.0));
        return Self{};
      }),
      bind("uniform_", [](Tensor t, c10::optional<double> from, c10::optional<double> to) {
        t.uniform_(from.value_or(0.0), to.value_or(1.0));
        return Self{};
      }),
      bind("exponential_", [](Tensor t, c10::optional<double> rate) {
        t.exponential_(rate.value_or(1.0));
        return Self{};
      }),
      // bernoulli(): draws 0 or 1 with the probabilities t holds;
      // bernoulli(p): with probability p for every element.
      bind("bernoulli", [](T t, c10::optional<double> p) {
        return p ? at::bernoulli(t, *p) : at::bernoulli(t);
      }),
      // bernoulli_(p): p a number or a tensor of probabilities.
      bind("bernoulli_", [](Tensor t, c10::optional<Operand> p) {
        if (!p) {
          t.bernoulli_(0.5);
        } else if (p->value->unsafeGetTensorImpl()->is_wrapped_number()) {
          t.bernoulli_(p->value->item<double>());
        } else {
          t.bernoulli_(*p->value);
        }
        return Self{};
      }),
      // multinomial(n [, replacement]): n category draws per row of weights,
      // as 1-based category indices.
      bind("multinomial", [](T weights, int64_t n, c10::optional<bool> replacement) {
        return one_based_indices(at::multinomial(weights, n, replacement.value_or(false)));
      }),
  };
}

}  // namespace accel::lua
