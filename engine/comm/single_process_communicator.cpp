#include "engine/comm/single_process_communicator.h"

#include <ATen/ATen.h>

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
  return {t.clone()};
}

void SingleProcessCommunicator::barrier() { ++counts_.barrier; }

}  // namespace accel
