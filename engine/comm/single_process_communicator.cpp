#include "engine/comm/single_process_communicator.h"

#include <ATen/ATen.h>

#include "engine/comm/flat_collective_args.h"

namespace accel {

void SingleProcessCommunicator::all_reduce(at::Tensor&, ReduceOp) { ++counts_.all_reduce; }

std::unique_ptr<PendingOp> SingleProcessCommunicator::all_reduce_async(at::Tensor&, ReduceOp) {
  ++counts_.all_reduce;
  return std::make_unique<CompletedOp>();
}

void SingleProcessCommunicator::broadcast(at::Tensor&, int root) {
  TORCH_CHECK(root == 0, "broadcast from rank ", root, " in a world of 1 rank");
  ++counts_.broadcast;
}

std::vector<at::Tensor> SingleProcessCommunicator::all_gather(const at::Tensor& t) {
  ++counts_.all_gather;
  counts_.all_gather_bytes += static_cast<int64_t>(t.nbytes());
  return {t.clone()};
}

// Alone, a rank's shard is its whole input and the gathered buffer its own
// input: copies, after the same checks as a real world's.
void SingleProcessCommunicator::reduce_scatter(at::Tensor& output, at::Tensor& input, ReduceOp op) {
  check_reduce_scatter_args(output, input, 1, op);
  ++counts_.reduce_scatter;
  counts_.reduce_scatter_bytes += static_cast<int64_t>(input.nbytes());
  output.copy_(input);
}

void SingleProcessCommunicator::all_gather_into(at::Tensor& output, const at::Tensor& input) {
  const bool in_place = check_all_gather_into_args(output, input, 1, 0);
  ++counts_.all_gather;
  counts_.all_gather_bytes += static_cast<int64_t>(output.nbytes());
  if (!in_place) output.copy_(input);
}

void SingleProcessCommunicator::barrier() { ++counts_.barrier; }

}  // namespace accel
