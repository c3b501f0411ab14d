#include "engine/comm/device_routed_communicator.h"

#include <ATen/core/Tensor.h>

namespace accel {

DeviceRoutedCommunicator::DeviceRoutedCommunicator(std::unique_ptr<Communicator> host,
                                                   std::unique_ptr<Communicator> device)
    : host_(std::move(host)), device_(std::move(device)) {}

Communicator& DeviceRoutedCommunicator::route(const at::Tensor& t) {
  return t.is_cuda() ? *device_ : *host_;
}

// counts() is the sum of both sides', so tests see every collective.
void DeviceRoutedCommunicator::add_counts() {
  const CollectiveCounts& h = host_->counts();
  const CollectiveCounts& d = device_->counts();
  counts_.all_reduce = h.all_reduce + d.all_reduce;
  counts_.all_reduce_shared_memory = h.all_reduce_shared_memory + d.all_reduce_shared_memory;
  counts_.broadcast = h.broadcast + d.broadcast;
  counts_.all_gather = h.all_gather + d.all_gather;
  counts_.barrier = h.barrier + d.barrier;
}

void DeviceRoutedCommunicator::all_reduce(at::Tensor& t, ReduceOp op) {
  route(t).all_reduce(t, op);
  add_counts();
}

std::unique_ptr<PendingOp> DeviceRoutedCommunicator::all_reduce_async(at::Tensor& t, ReduceOp op) {
  auto pending = route(t).all_reduce_async(t, op);
  add_counts();
  return pending;
}

void DeviceRoutedCommunicator::broadcast(at::Tensor& t, int root) {
  route(t).broadcast(t, root);
  add_counts();
}

std::vector<at::Tensor> DeviceRoutedCommunicator::all_gather(const at::Tensor& t) {
  auto parts = route(t).all_gather(t);
  add_counts();
  return parts;
}

void DeviceRoutedCommunicator::barrier() {
  host_->barrier();
  add_counts();
}

}  // namespace accel
