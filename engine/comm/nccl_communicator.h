// Collectives of CUDA tensors over NCCL, through LibTorch's c10d
// ProcessGroupNCCL, joined by rendezvous on the launcher's store. Built only
// against a CUDA LibTorch (ACCEL_WITH_CUDA). Host tensors are not its job:
// make_communicator pairs it with a Gloo communicator for those
// (engine/comm/device_routed_communicator.h).
//
// NCCL runs on its own CUDA stream: an all-reduce started here waits for
// the work already queued on the current stream, and PendingOp::wait()
// makes the current stream wait for it. Synchronous collectives and wait()
// also block this thread until NCCL finishes or the run's timeout passes,
// so a peer that never arrives becomes a timeout naming it, as on Gloo,
// rather than a kernel that waits forever.
#pragma once
#include <memory>

#include "engine/comm/communicator.h"
#include "engine/comm/point_to_point.h"

namespace accel {

class NcclCommunicator final : public Communicator, public PointToPoint {
 public:
  // The world (make_communicator) or a group of some of its ranks
  // (make_group_communicator): this process is `group_rank` of
  // `group_size`, on GPU options.cuda_device (made this thread's current
  // device), and the members rendezvous under the store keys starting with
  // `store_prefix`, which no other communicator of the run uses. c10d makes
  // the NCCL communicator itself at the first collective (or send_recv),
  // which every member must then reach.
  NcclCommunicator(const ProcessState& state, const CommunicatorOptions& options,
                   const std::string& store_prefix, int group_rank, int group_size);
  ~NcclCommunicator() override;

  int rank() const override;
  int size() const override;
  std::string backend() const override { return "nccl"; }
  void all_reduce(at::Tensor& t, ReduceOp op) override;
  std::unique_ptr<PendingOp> all_reduce_async(at::Tensor& t, ReduceOp op) override;
  void broadcast(at::Tensor& t, int root) override;
  std::vector<at::Tensor> all_gather(const at::Tensor& t) override;
  void reduce_scatter(at::Tensor& output, at::Tensor& input, ReduceOp op) override;
  void all_gather_into(at::Tensor& output, const at::Tensor& input) override;
  std::unique_ptr<PendingOp> all_gather_into_async(at::Tensor& output, const at::Tensor& input) override;
  void barrier() override;
  // c10d's send and recv in one coalesced NCCL group (ncclGroupStart/End,
  // as torch.distributed.batch_isend_irecv), so that a ring of them cannot
  // deadlock; CUDA tensors only.
  void send_recv(const at::Tensor& send, int to, at::Tensor& recv, int from) override;
  // c10d's send and recv, CUDA tensors only (tags are ignored: NCCL matches
  // by order, which the tags' order within a pair then follows).
  std::unique_ptr<PendingOp> isend(const at::Tensor& t, int to, int tag) override;
  std::unique_ptr<PendingOp> irecv(at::Tensor& t, int from, int tag) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace accel
