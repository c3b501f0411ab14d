// Wraps a communicator whose ranks all run on this machine so that its
// all-reduces, reduce-scatters and flat all-gathers (all_gather_into) of CPU
// tensors go through a shared memory segment
// (engine/comm/shared_memory_all_reduce.h) instead of the inner transport;
// every other collective, and every tensor the segment does not take, goes
// to the inner one. make_communicator puts it over Gloo, whose TCP over
// loopback costs milliseconds where the segment costs microseconds.
#pragma once
#include <chrono>
#include <memory>

#include "engine/comm/communicator.h"
#include "engine/comm/point_to_point.h"
#include "engine/comm/shared_memory_all_reduce.h"

namespace accel {

class SharedMemoryCommunicator final : public Communicator, public PointToPoint {
 public:
  // Joins the segment over the inner communicator's collectives: every rank
  // gets it or none does (then everything goes to `inner`). A rank that
  // cannot create or open it (no /dev/shm, another machine's) says why on
  // stderr and answers no. The segment's name starts with `name_prefix`
  // (the run's, which its guardian sweeps after a crash; "" for the default).
  SharedMemoryCommunicator(std::unique_ptr<Communicator> inner, std::chrono::milliseconds timeout,
                           const std::string& name_prefix = "");

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string backend() const override { return inner_->backend(); }
  void all_reduce(at::Tensor& t, ReduceOp op) override;
  std::unique_ptr<PendingOp> all_reduce_async(at::Tensor& t, ReduceOp op) override;
  void broadcast(at::Tensor& t, int root) override { inner_->broadcast(t, root); }
  std::vector<at::Tensor> all_gather(const at::Tensor& t) override { return inner_->all_gather(t); }
  void reduce_scatter(at::Tensor& output, at::Tensor& input, ReduceOp op) override;
  void all_gather_into(at::Tensor& output, const at::Tensor& input) override;
  // Through the segment it completes before returning; the inner one's
  // otherwise (async over Gloo).
  std::unique_ptr<PendingOp> all_gather_into_async(at::Tensor& output, const at::Tensor& input) override;
  void barrier() override { inner_->barrier(); }
  void finish() override { inner_->finish(); }
  // The inner one's: the segment carries collectives only.
  std::unique_ptr<PendingOp> isend(const at::Tensor& t, int to, int tag) override {
    return point_to_point(*inner_).isend(t, to, tag);
  }
  std::unique_ptr<PendingOp> irecv(at::Tensor& t, int from, int tag) override {
    return point_to_point(*inner_).irecv(t, from, tag);
  }
  // The inner one's, less the collectives of joining the segment, plus the
  // collectives the segment carried.
  CollectiveCounts counts() const override;

 private:
  void join(std::chrono::milliseconds timeout, const std::string& name_prefix);

  std::unique_ptr<Communicator> inner_;
  std::unique_ptr<SharedMemoryAllReduce> segment_;  // null: the inner one does every all-reduce
  CollectiveCounts joining_;
};

}  // namespace accel
