#include "engine/comm/flat_collective_args.h"

#include <ATen/ATen.h>

#include "engine/tensor_description.h"

namespace accel {
namespace {

void check_flat(const char* operation, const at::Tensor& output, const at::Tensor& input) {
  TORCH_CHECK(output.dim() == 1 && input.dim() == 1 && output.is_contiguous() && input.is_contiguous(),
              operation, ": output and input must be 1-D and contiguous, got output ",
              describe_tensor(output), " and input ", describe_tensor(input));
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), operation,
              ": output and input must have one dtype, got output ", describe_tensor(output),
              " and input ", describe_tensor(input));
  TORCH_CHECK(output.device() == input.device(), operation, ": output and input must be on one device, got ",
              output.device().str(), " and ", input.device().str());
}

void check_sizes(const char* operation, const char* flat_name, const at::Tensor& flat,
                 const char* shard_name, const at::Tensor& shard, int size) {
  TORCH_CHECK(flat.numel() == shard.numel() * size, operation, ": ", flat_name, " has ", flat.numel(),
              " elements, expected ", size, size == 1 ? " rank" : " ranks", " x ", shard.numel(), " (",
              shard_name, "'s) = ", shard.numel() * size);
}

bool overlap(const at::Tensor& a, const at::Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0) return false;
  const char* a_begin = static_cast<const char*>(a.data_ptr());
  const char* b_begin = static_cast<const char*>(b.data_ptr());
  return a_begin < b_begin + b.nbytes() && b_begin < a_begin + a.nbytes();
}

}  // namespace

void check_reduce_scatter_args(const at::Tensor& output, const at::Tensor& input, int size, ReduceOp op) {
  check_flat("reduce_scatter", output, input);
  check_sizes("reduce_scatter", "input", input, "output", output, size);
  TORCH_CHECK(op != ReduceOp::Average || at::isFloatingType(output.scalar_type()),
              "reduce_scatter: '", reduce_op_name(op), "' needs a floating-point dtype, got ",
              describe_tensor(output), "; use 'sum' and divide");
  TORCH_CHECK(!overlap(output, input),
              "reduce_scatter: output shares memory with input; give it a buffer of its own");
}

bool check_all_gather_into_args(const at::Tensor& output, const at::Tensor& input, int size, int rank) {
  check_flat("all_gather_into", output, input);
  check_sizes("all_gather_into", "output", output, "input", input, size);
  if (!overlap(output, input)) return false;
  TORCH_CHECK(input.data_ptr() == rank_slice(output, rank, input.numel()).data_ptr(),
              "all_gather_into: input shares memory with output but is not rank ", rank,
              "'s slice of it (elements ", rank * input.numel(), " to ", (rank + 1) * input.numel() - 1,
              "), the one place an input may be gathered from in place");
  return true;
}

at::Tensor rank_slice(const at::Tensor& flat, int rank, int64_t n) { return flat.narrow(0, rank * n, n); }

}  // namespace accel
