// Collectives over Gloo through LibTorch's c10d, joined by rendezvous on the
// launcher's store (engine/comm/c10d_store.h). When every rank runs on this
// machine, make_communicator puts it behind shared memory for all-reduces
// (engine/comm/shared_memory_communicator.h).
#pragma once
#include <memory>

#include "engine/comm/communicator.h"
#include "engine/comm/point_to_point.h"

namespace accel {

class GlooCommunicator final : public Communicator, public PointToPoint {
 public:
  // Blocks until every rank has joined or the timeout passes.
  GlooCommunicator(const ProcessState& state, const CommunicatorOptions& options);
  // A group of some of the world's ranks (engine/comm/group_communicator.h):
  // this process is `group_rank` of `group_size`, and the members rendezvous
  // under the store keys starting with `store_prefix`, which no other group
  // of the run uses. Only the members construct it.
  GlooCommunicator(const ProcessState& state, const CommunicatorOptions& options,
                   const std::string& store_prefix, int group_rank, int group_size);
  ~GlooCommunicator() override;

  int rank() const override;
  int size() const override;
  std::string backend() const override { return "gloo"; }
  void all_reduce(at::Tensor& t, ReduceOp op) override;
  std::unique_ptr<PendingOp> all_reduce_async(at::Tensor& t, ReduceOp op) override;
  void broadcast(at::Tensor& t, int root) override;
  std::vector<at::Tensor> all_gather(const at::Tensor& t) override;
  void reduce_scatter(at::Tensor& output, at::Tensor& input, ReduceOp op) override;
  void all_gather_into(at::Tensor& output, const at::Tensor& input) override;
  std::unique_ptr<PendingOp> all_gather_into_async(at::Tensor& output, const at::Tensor& input) override;
  void barrier() override;
  // c10d's send and recv.
  std::unique_ptr<PendingOp> isend(const at::Tensor& t, int to, int tag) override;
  std::unique_ptr<PendingOp> irecv(at::Tensor& t, int from, int tag) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace accel
