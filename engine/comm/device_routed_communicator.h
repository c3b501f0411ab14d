// Routes each collective by where its tensor lives: CUDA tensors to the
// device communicator (NCCL), host tensors to the host one (Gloo). A run on
// GPUs needs both: gradients and metrics live on the GPU, while
// gather_object, the --debug checks and barriers carry host tensors, which
// NCCL cannot. PyTorch users make the same pair of process groups.
#pragma once
#include <memory>

#include "engine/comm/communicator.h"
#include "engine/comm/point_to_point.h"

namespace accel {

class DeviceRoutedCommunicator final : public Communicator, public PointToPoint {
 public:
  DeviceRoutedCommunicator(std::unique_ptr<Communicator> host, std::unique_ptr<Communicator> device);

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  // The device's backend names the run ("nccl"); the host one is its helper.
  std::string backend() const override { return device_->backend(); }
  void all_reduce(at::Tensor& t, ReduceOp op) override;
  std::unique_ptr<PendingOp> all_reduce_async(at::Tensor& t, ReduceOp op) override;
  void broadcast(at::Tensor& t, int root) override;
  std::vector<at::Tensor> all_gather(const at::Tensor& t) override;
  // By where `output` lives (the input must live there too).
  void reduce_scatter(at::Tensor& output, at::Tensor& input, ReduceOp op) override;
  void all_gather_into(at::Tensor& output, const at::Tensor& input) override;
  std::unique_ptr<PendingOp> all_gather_into_async(at::Tensor& output, const at::Tensor& input) override;
  // On the host: it needs no GPU work, and so does not wait for queued kernels.
  void barrier() override;
  // By where the tensor lives (for send_recv `recv`, and `send` must live
  // there too), over that side's point-to-point exchange.
  std::unique_ptr<PendingOp> isend(const at::Tensor& t, int to, int tag) override;
  std::unique_ptr<PendingOp> irecv(at::Tensor& t, int from, int tag) override;
  void send_recv(const at::Tensor& send, int to, at::Tensor& recv, int from) override;
  // The sum of both sides', so tests see every collective.
  CollectiveCounts counts() const override { return host_->counts() + device_->counts(); }

 private:
  Communicator& route(const at::Tensor& t);

  std::unique_ptr<Communicator> host_;
  std::unique_ptr<Communicator> device_;
};

}  // namespace accel
