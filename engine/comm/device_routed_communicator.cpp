#include "engine/comm/device_routed_communicator.h"

#include <ATen/core/Tensor.h>

namespace accel {

DeviceRoutedCommunicator::DeviceRoutedCommunicator(std::unique_ptr<Communicator> host,
                                                   std::unique_ptr<Communicator> device)
    : host_(std::move(host)), device_(std::move(device)) {}

Communicator& DeviceRoutedCommunicator::route(const at::Tensor& t) {
  return t.is_cuda() ? *device_ : *host_;
}

void DeviceRoutedCommunicator::all_reduce(at::Tensor& t, ReduceOp op) { route(t).all_reduce(t, op); }

std::unique_ptr<PendingOp> DeviceRoutedCommunicator::all_reduce_async(at::Tensor& t, ReduceOp op) {
  return route(t).all_reduce_async(t, op);
}

void DeviceRoutedCommunicator::broadcast(at::Tensor& t, int root) { route(t).broadcast(t, root); }

std::vector<at::Tensor> DeviceRoutedCommunicator::all_gather(const at::Tensor& t) {
  return route(t).all_gather(t);
}

void DeviceRoutedCommunicator::reduce_scatter(at::Tensor& output, at::Tensor& input, ReduceOp op) {
  route(output).reduce_scatter(output, input, op);
}

void DeviceRoutedCommunicator::all_gather_into(at::Tensor& output, const at::Tensor& input) {
  route(output).all_gather_into(output, input);
}

std::unique_ptr<PendingOp> DeviceRoutedCommunicator::all_gather_into_async(at::Tensor& output,
                                                                           const at::Tensor& input) {
  return route(output).all_gather_into_async(output, input);
}

void DeviceRoutedCommunicator::barrier() { host_->barrier(); }

std::unique_ptr<PendingOp> DeviceRoutedCommunicator::isend(const at::Tensor& t, int to, int tag) {
  return point_to_point(route(t)).isend(t, to, tag);
}

std::unique_ptr<PendingOp> DeviceRoutedCommunicator::irecv(at::Tensor& t, int from, int tag) {
  return point_to_point(route(t)).irecv(t, from, tag);
}

void DeviceRoutedCommunicator::send_recv(const at::Tensor& send, int to, at::Tensor& recv, int from) {
  point_to_point(route(recv)).send_recv(send, to, recv, from);
}

}  // namespace accel
