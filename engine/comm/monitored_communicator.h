// Wraps a backend's communicator so that every collective is recorded in a
// CollectiveMonitor (published for the launcher's stall reports) with the
// recipe line that called it, and so that a collective failing at the
// timeout becomes a CollectiveTimeout naming the operation, that line and
// the ranks that did not arrive, rather than the backend's bare message.
#pragma once
#include <chrono>
#include <memory>

#include "engine/comm/collective_monitor.h"
#include "engine/comm/communicator.h"

namespace accel {

class MonitoredCommunicator final : public Communicator {
 public:
  MonitoredCommunicator(std::unique_ptr<Communicator> inner,
                        std::shared_ptr<CollectiveMonitor> monitor,
                        std::chrono::milliseconds timeout);

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string backend() const override { return inner_->backend(); }
  void all_reduce(at::Tensor& t, ReduceOp op) override;
  std::unique_ptr<PendingOp> all_reduce_async(at::Tensor& t, ReduceOp op) override;
  void broadcast(at::Tensor& t, int root) override;
  std::vector<at::Tensor> all_gather(const at::Tensor& t) override;
  void reduce_scatter(at::Tensor& output, at::Tensor& input, ReduceOp op) override;
  void all_gather_into(at::Tensor& output, const at::Tensor& input) override;
  std::unique_ptr<PendingOp> all_gather_into_async(at::Tensor& output, const at::Tensor& input) override;
  void barrier() override;
  // Through the store (CollectiveMonitor::finish_together), recorded as
  // collective "finish"; a barrier when the monitor has no store.
  void finish() override;
  CollectiveCounts counts() const override { return inner_->counts(); }

 private:
  // Runs `body` as collective `op`, recorded from start to end.
  template <class Body>
  auto monitored(const char* op, const std::string& detail, Body&& body);
  // Starts `start()`, a PendingOp, as collective `op`, recorded until its
  // wait() returns.
  template <class Start>
  std::unique_ptr<PendingOp> monitored_async(const char* op, const std::string& detail, Start&& start);

  std::unique_ptr<Communicator> inner_;
  std::shared_ptr<CollectiveMonitor> monitor_;
  std::chrono::milliseconds timeout_;
};

// Marks the monitor's collective `seq` left when destroyed, and turns a
// failure that came at the timeout into a CollectiveTimeout; shared with
// make_communicator, which records joining the group as collective "init".
class MonitoredSpan {
 public:
  MonitoredSpan(CollectiveMonitor& monitor, int64_t seq, std::chrono::milliseconds timeout);
  ~MonitoredSpan();
  MonitoredSpan(const MonitoredSpan&) = delete;
  MonitoredSpan& operator=(const MonitoredSpan&) = delete;

  // Call from a catch block: throws CollectiveTimeout when the failure came
  // at (or after) the timeout; returns otherwise, for the caller to rethrow.
  void throw_if_timed_out() const;

 private:
  CollectiveMonitor& monitor_;
  int64_t seq_;
  std::chrono::milliseconds timeout_;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace accel
