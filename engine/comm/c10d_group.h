// What the backends on LibTorch's c10d share (GlooCommunicator,
// NcclCommunicator): the rendezvous of a group's members on the launcher's
// store, its rank and size, waiting for its work (failures become
// CollectiveError naming the operation), work in flight as a PendingOp, and
// the collectives whose c10d calls are the same for both: all-reduce's
// start, broadcast, the list all-gather, barrier, and the point-to-point peer check.
// What differs stays with each backend: Gloo stages CUDA tensors through
// the host, reduces no bfloat16 (1.13) and has no reduce-scatter; NCCL takes
// CUDA tensors only, averages itself, has flat collectives and coalesced
// send/recv. A template over the process group's type: LibTorch 1.13's
// groups derive from c10d::ProcessGroup, 2.x's from c10d::Backend.
#pragma once
#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/comm/c10d_store.h"
#include "engine/comm/communicator.h"
#include "engine/process_state.h"

namespace accel {

using C10dWork = c10::intrusive_ptr<c10d::Work>;

// The store the members of a group rendezvous on: the launcher's, its keys
// under `prefix` (which no other group of the run uses).
inline c10::intrusive_ptr<c10d::Store> c10d_rendezvous_store(const ProcessState& state,
                                                             const CommunicatorOptions& options,
                                                             const std::string& prefix, const char* backend) {
  TORCH_CHECK(state.master_port > 0, "the ", backend, " backend needs MASTER_PORT: start the run with accel-run");
  auto store = c10::make_intrusive<C10dStore>(state.store_address(), options.timeout);
  return c10::make_intrusive<c10d::PrefixStore>(prefix, store);
}

// Waits for c10d work, turning the backend's failures into CollectiveError;
// the monitor above turns a failure at the timeout into a CollectiveTimeout
// that names the missing ranks. A zero `timeout` leaves the wait to the
// group (Gloo's work fails within its own timeout); NCCL's work waits on
// the host for at most `timeout`, so a peer that never arrives becomes a
// timeout rather than a kernel that waits forever.
inline void wait_for_c10d(const C10dWork& work, const char* operation, std::chrono::milliseconds timeout) {
  try {
    if (timeout.count() > 0) {
      work->wait(timeout);
    } else {
      work->wait();
    }
  } catch (const std::exception& e) {
    throw CollectiveError(std::string(operation) + " failed: " + e.what());
  }
}

// A c10d operation in flight; `finish` runs once it has completed.
class C10dPendingOp final : public PendingOp {
 public:
  C10dPendingOp(C10dWork work, const char* operation, std::chrono::milliseconds timeout,
                std::function<void()> finish = {})
      : work_(std::move(work)), operation_(operation), timeout_(timeout), finish_(std::move(finish)) {}
  void wait() override {
    wait_for_c10d(work_, operation_, timeout_);
    if (finish_) finish_();
  }

 private:
  C10dWork work_;
  const char* operation_;
  std::chrono::milliseconds timeout_;
  std::function<void()> finish_;
};

template <class Group>
class C10dGroup {
 public:
  // `wait_timeout`: how long a wait blocks this thread at most, zero for
  // the group's own (wait_for_c10d).
  C10dGroup(c10::intrusive_ptr<Group> group, int rank, int size, std::chrono::milliseconds wait_timeout)
      : group_(std::move(group)), rank_(rank), size_(size), timeout_(wait_timeout) {}

  Group& group() { return *group_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

  void wait(const C10dWork& work, const char* operation) const { wait_for_c10d(work, operation, timeout_); }
  std::unique_ptr<PendingOp> pending(C10dWork work, const char* operation, std::function<void()> finish = {}) const {
    return std::make_unique<C10dPendingOp>(std::move(work), operation, timeout_, std::move(finish));
  }

  C10dWork start_all_reduce(at::Tensor& t, c10d::ReduceOp op) {
    std::vector<at::Tensor> tensors{t};
    c10d::AllreduceOptions opts;
    opts.reduceOp = op;
    return group_->allreduce(tensors, opts);
  }

  void check_root(int root) const {
    TORCH_CHECK(root >= 0 && root < size_, "broadcast from rank ", root, " in a world of ", size_, " ranks");
  }
  void broadcast(at::Tensor& t, int root) {
    check_root(root);
    std::vector<at::Tensor> tensors{t};
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    wait(group_->broadcast(tensors, opts), "broadcast");
  }

  // Elements travel as bytes, which a gather carries unchanged whatever
  // their type: Gloo has neither bool nor (LibTorch 1.13's) bfloat16.
  std::vector<at::Tensor> all_gather(const at::Tensor& t) {
    std::vector<at::Tensor> input{t.contiguous().reshape({-1}).view(at::kByte)};
    std::vector<std::vector<at::Tensor>> output(1);
    for (int r = 0; r < size_; ++r) output[0].push_back(at::empty_like(input[0]));
    wait(group_->allgather(output, input), "all_gather");
    std::vector<at::Tensor> parts;
    for (const at::Tensor& bytes : output[0]) parts.push_back(bytes.view(t.scalar_type()).view(t.sizes()));
    return parts;
  }

  void barrier() { wait(group_->barrier(), "barrier"); }

  // A point-to-point peer is a rank of the group other than this one.
  void check_peer(int peer, const char* what) const {
    TORCH_CHECK(peer >= 0 && peer < size_ && peer != rank_, what, " rank ", peer, " in a group of ", size_,
                " ranks, from its rank ", rank_, ": the peer must be another rank of the group");
  }

 private:
  c10::intrusive_ptr<Group> group_;
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
};

}  // namespace accel
