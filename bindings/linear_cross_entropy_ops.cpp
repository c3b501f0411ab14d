// accel.nn.functional.linear_cross_entropy: the chunked loss of an output
// layer (engine/nn/linear_cross_entropy.h), for the causal models' loss and
// for a recipe's own heads:
//   F.linear_cross_entropy(hidden (..., H), weight (V, H), targets (...)
//     [, {bias, lora_A, lora_B, scaling = 1, ignore_index = -100,
//         num_items_in_batch, reduction = "mean" | "sum", chunk_size,
//         index_base = 1, process_group}])
// equals F.cross_entropy(F.linear(hidden, weight, bias), targets, ...)
// (plus scaling * lora_B(lora_A(hidden)) in the logits), without the
// logits. With process_group (a tp group) weight and bias are this rank's
// slice of the vocabulary, as a ColwiseLinear holds it, and the loss is the
// whole vocabulary's on every rank (vocabulary-parallel); hidden's gradient
// is then this rank's part, summed by the group's copy_to the hidden
// states came through. Targets are 1-based classes, as cross_entropy's, or 0-based token
// ids with {index_base = 0}; ignore_index is in the same base.
#include "bindings/distributed_ops.h"
#include "bindings/op_tables.h"
#include "engine/nn/linear_cross_entropy.h"

namespace accel::lua {
namespace {

using T = const at::Tensor&;

at::Tensor linear_cross_entropy(lua_State* L, T hidden, T weight, T targets, Options o) {
  check_option_names(L, o, {"bias", "lora_A", "lora_B", "scaling", "ignore_index", "num_items_in_batch", "reduction",
                            "chunk_size", "index_base", "process_group"});
  const int64_t base = option_integer(L, o, "index_base", 1);
  TORCH_CHECK(base == 0 || base == 1, "option 'index_base' must be 0 or 1, got ", base);
  nn::OutputLayer layer;
  layer.weight = weight;
  layer.bias = option_tensor(L, o, "bias").value_or(at::Tensor());
  layer.lora_a = option_tensor(L, o, "lora_A").value_or(at::Tensor());
  layer.lora_b = option_tensor(L, o, "lora_B").value_or(at::Tensor());
  TORCH_CHECK(layer.lora_a.defined() == layer.lora_b.defined(), "options 'lora_A' and 'lora_B' go together");
  layer.scaling = option_number(L, o, "scaling", 1.0);
  if (option_present(L, o, "process_group")) {
    lua_getfield(L, o.index, "process_group");
    layer.vocab_group = group_communicator_arg(L, -1, "option 'process_group'");
    lua_pop(L, 1);
  }
  nn::LinearCrossEntropyOptions options;
  options.ignore_index = option_integer(L, o, "ignore_index", -100 + base) - base;
  options.chunk_size = option_integer(L, o, "chunk_size", 0);
  TORCH_CHECK(options.chunk_size >= 0, "option 'chunk_size' must be a positive number of tokens");
  if (option_present(L, o, "num_items_in_batch")) {
    options.num_items = option_number(L, o, "num_items_in_batch", 0);
  }
  const std::string reduction = option_string(L, o, "reduction", "mean");
  TORCH_CHECK(reduction == "mean" || reduction == "sum", "option 'reduction' must be 'mean' or 'sum', got '",
              reduction, "'");
  options.sum = reduction == "sum";
  TORCH_CHECK(!targets.is_floating_point(), "targets must be an integer tensor of class ids, got ",
              targets.scalar_type());
  TORCH_CHECK(hidden.dim() >= 1 && targets.numel() * hidden.size(-1) == hidden.numel(), "hidden states ",
              hidden.sizes(), " and targets ", targets.sizes(), " do not hold one target per row");
  at::Tensor zero_based = targets.reshape(-1).to(at::kLong);
  if (base == 1) zero_based = zero_based - 1;
  return nn::linear_cross_entropy(hidden.reshape({-1, hidden.size(-1)}), layer, zero_based, options);
}

}  // namespace

std::vector<Binding> linear_cross_entropy_bindings() {
  return {bind("linear_cross_entropy", linear_cross_entropy)};
}

}  // namespace accel::lua
