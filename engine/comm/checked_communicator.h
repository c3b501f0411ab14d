// accel-run --debug: before every collective, the ranks exchange a small
// fixed-size description of the call (operation, tensor dtype and shape,
// reduce op or broadcast root, and the recipe line) with one all_gather, and
// all fail with a CollectiveMismatch naming the ranks and what each passed
// when they disagree, instead of hanging or mixing up data.
#pragma once
#include <memory>

#include "engine/comm/communicator.h"

namespace accel {

class CheckedCommunicator final : public Communicator {
 public:
  explicit CheckedCommunicator(std::unique_ptr<Communicator> inner);

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string backend() const override { return inner_->backend(); }
  void all_reduce(at::Tensor& t, ReduceOp op) override;
  std::unique_ptr<PendingOp> all_reduce_async(at::Tensor& t, ReduceOp op) override;
  void broadcast(at::Tensor& t, int root) override;
  std::vector<at::Tensor> all_gather(const at::Tensor& t) override;
  // Ranks must agree on the shard (output's, input's) and, for
  // reduce_scatter, the reduce op.
  void reduce_scatter(at::Tensor& output, at::Tensor& input, ReduceOp op) override;
  void all_gather_into(at::Tensor& output, const at::Tensor& input) override;
  std::unique_ptr<PendingOp> all_gather_into_async(at::Tensor& output, const at::Tensor& input) override;
  void barrier() override;
  // The inner one's, less the checks' own all_gathers.
  CollectiveCounts counts() const override { return inner_->counts() - checks_; }

 private:
  std::unique_ptr<Communicator> inner_;
  CollectiveCounts checks_;
};

}  // namespace accel
