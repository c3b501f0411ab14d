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

template <class Start>
std::unique_ptr<PendingOp> MonitoredCommunicator::monitored_async(const char* op, const std::string& detail,
                                                                  Start&& start) {
  auto span = std::make_unique<MonitoredSpan>(*monitor_, monitor_->enter(op, current_call_site(), detail),
                                              timeout_);
  std::unique_ptr<PendingOp> pending;
  try {
    pending = start();  // shared memory completes here, and may time out here
  } catch (const CollectiveError&) {
    span->throw_if_timed_out();
    throw;
  }
  return std::make_unique<MonitoredPendingOp>(std::move(pending), std::move(span));
}

std::unique_ptr<PendingOp> MonitoredCommunicator::all_reduce_async(at::Tensor& t, ReduceOp op) {
  return monitored_async("all_reduce", describe_tensor(t) + " (" + reduce_op_name(op) + ")",
                         [&] { return inner_->all_reduce_async(t, op); });
}

void MonitoredCommunicator::broadcast(at::Tensor& t, int root) {
  monitored("broadcast", describe_tensor(t) + " from rank " + std::to_string(root),
            [&] { inner_->broadcast(t, root); });
}

std::vector<at::Tensor> MonitoredCommunicator::all_gather(const at::Tensor& t) {
  return monitored("all_gather", describe_tensor(t), [&] { return inner_->all_gather(t); });
}

// The shard describes both collectives: what every rank sends or receives.
void MonitoredCommunicator::reduce_scatter(at::Tensor& output, at::Tensor& input, ReduceOp op) {
  monitored("reduce_scatter", describe_tensor(output) + " (" + reduce_op_name(op) + ")",
            [&] { inner_->reduce_scatter(output, input, op); });
}

void MonitoredCommunicator::all_gather_into(at::Tensor& output, const at::Tensor& input) {
  monitored("all_gather_into", describe_tensor(input), [&] { inner_->all_gather_into(output, input); });
}

std::unique_ptr<PendingOp> MonitoredCommunicator::all_gather_into_async(at::Tensor& output,
                                                                        const at::Tensor& input) {
  return monitored_async("all_gather_into", describe_tensor(input),
                         [&] { return inner_->all_gather_into_async(output, input); });
}

void MonitoredCommunicator::finish() {
  monitored("finish", "", [&] {
    if (!monitor_->finish_together()) inner_->barrier();
  });
  monitor_->publish_now();
}

void MonitoredCommunicator::barrier() {
  monitored("barrier", "", [&] { inner_->barrier(); });
}

}  // namespace accel
