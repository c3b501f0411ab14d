#include "engine/comm/monitored_communicator.h"

#include <ATen/ATen.h>

#include "engine/tensor_description.h"

namespace accel {
namespace {

// A backend failure this close to the timeout is the timeout, whatever words
// the backend used (Gloo may report a peer that timed out first as closed).
constexpr double kTimeoutShare = 0.9;

class MonitoredPendingOp final : public PendingOp {
 public:
  MonitoredPendingOp(std::unique_ptr<PendingOp> inner, std::unique_ptr<MonitoredSpan> span)
      : inner_(std::move(inner)), span_(std::move(span)) {}
  void wait() override {
    try {
      inner_->wait();
    } catch (const CollectiveError&) {
      span_->throw_if_timed_out();
      throw;
    }
    span_.reset();
  }

 private:
  std::unique_ptr<PendingOp> inner_;
  std::unique_ptr<MonitoredSpan> span_;
};

}  // namespace

MonitoredSpan::MonitoredSpan(CollectiveMonitor& monitor, int64_t seq,
                             std::chrono::milliseconds timeout)
    : monitor_(monitor), seq_(seq), timeout_(timeout), started_(std::chrono::steady_clock::now()) {}

MonitoredSpan::~MonitoredSpan() { monitor_.leave(seq_); }

void MonitoredSpan::throw_if_timed_out() const {
  auto elapsed = std::chrono::steady_clock::now() - started_;
  if (elapsed >= timeout_ * kTimeoutShare) throw CollectiveTimeout(monitor_.timeout_message(seq_));
}

MonitoredCommunicator::MonitoredCommunicator(std::unique_ptr<Communicator> inner,
                                             std::shared_ptr<CollectiveMonitor> monitor,
                                             std::chrono::milliseconds timeout)
    : inner_(std::move(inner)), monitor_(std::move(monitor)), timeout_(timeout) {}

template <class Body>
auto MonitoredCommunicator::monitored(const char* op, const std::string& detail, Body&& body) {
  MonitoredSpan span(*monitor_, monitor_->enter(op, current_call_site(), detail), timeout_);
  try {
    return body();
  } catch (const CollectiveError&) {
    span.throw_if_timed_out();
    throw;
  }
}

void MonitoredCommunicator::all_reduce(at::Tensor& t, ReduceOp op) {
  monitored("all_reduce", describe_tensor(t) + " (" + reduce_op_name(op) + ")",
            [&] { inner_->all_reduce(t, op); });
}

std::unique_ptr<PendingOp> MonitoredCommunicator::all_reduce_async(at::Tensor& t, ReduceOp op) {
  auto span = std::make_unique<MonitoredSpan>(
      *monitor_,
      monitor_->enter("all_reduce", current_call_site(),
                      describe_tensor(t) + " (" + reduce_op_name(op) + ")"),
      timeout_);
  std::unique_ptr<PendingOp> pending = inner_->all_reduce_async(t, op);
  return std::make_unique<MonitoredPendingOp>(std::move(pending), std::move(span));
}

void MonitoredCommunicator::broadcast(at::Tensor& t, int root) {
  monitored("broadcast", describe_tensor(t) + " from rank " + std::to_string(root),
            [&] { inner_->broadcast(t, root); });
}

std::vector<at::Tensor> MonitoredCommunicator::all_gather(const at::Tensor& t) {
  return monitored("all_gather", describe_tensor(t), [&] { return inner_->all_gather(t); });
}

void MonitoredCommunicator::finish() {
  monitored("finish", "", [&] {
    if (!monitor_->finish_together()) inner_->barrier();
  });
}

void MonitoredCommunicator::barrier() {
  monitored("barrier", "", [&] { inner_->barrier(); });
}

}  // namespace accel
