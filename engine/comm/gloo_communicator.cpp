#include "engine/comm/gloo_communicator.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "engine/comm/c10d_all_gather.h"
#include "engine/process_state.h"
#include "engine/store/c10d_store.h"

namespace accel {
namespace {

using Work = c10::intrusive_ptr<c10d::Work>;

c10d::ReduceOp to_c10d(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Average:  // Gloo has no average: sum, then divide
      return c10d::ReduceOp::SUM;
    case ReduceOp::Max:
      return c10d::ReduceOp::MAX;
    case ReduceOp::Min:
      return c10d::ReduceOp::MIN;
  }
  TORCH_CHECK(false, "unknown reduce op");
}

bool is_loopback(const std::string& addr) {
  return addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1";
}

// Waits for a c10d operation, turning Gloo's failures into CollectiveError.
void wait_for(const Work& work, const char* operation) {
  try {
    work->wait();
  } catch (const std::exception& e) {
    throw CollectiveError(std::string(operation) + " failed: " + e.what());
  }
}

class GlooPendingOp final : public PendingOp {
 public:
  GlooPendingOp(Work work, at::Tensor tensor, int average_over)
      : work_(std::move(work)), tensor_(std::move(tensor)), average_over_(average_over) {}
  void wait() override {
    wait_for(work_, "all_reduce");
    if (average_over_ > 1) tensor_.div_(average_over_);
  }

 private:
  Work work_;
  at::Tensor tensor_;
  int average_over_;
};

}  // namespace

struct GlooCommunicator::Impl {
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  int rank = 0;
  int size = 1;
};

GlooCommunicator::GlooCommunicator(const ProcessState& state, const CommunicatorOptions& options)
    : impl_(std::make_unique<Impl>()) {
  TORCH_CHECK(state.master_port > 0,
              "the gloo backend needs MASTER_PORT: start the run with accel-run");
  auto store = c10::make_intrusive<C10dStore>(state.store_address(), options.timeout);
  auto prefixed = c10::make_intrusive<c10d::PrefixStore>("gloo", store);
  auto gloo_options = c10d::ProcessGroupGloo::Options::create();
  gloo_options->timeout = options.timeout;
  // On one machine, loopback avoids a hostname that may not resolve.
  gloo_options->devices.push_back(
      is_loopback(state.master_addr)
          ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
          : c10d::ProcessGroupGloo::createDefaultDevice());
  impl_->group = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, state.rank,
                                                             state.world_size, gloo_options);
  impl_->rank = state.rank;
  impl_->size = state.world_size;
}

GlooCommunicator::~GlooCommunicator() = default;

int GlooCommunicator::rank() const { return impl_->rank; }
int GlooCommunicator::size() const { return impl_->size; }

// CUDA tensors (ranks sharing one GPU, which NCCL refuses) go through host
// copies.
std::unique_ptr<PendingOp> GlooCommunicator::all_reduce_async(at::Tensor& t, ReduceOp op) {
  if (t.is_cuda()) {
    at::Tensor host = t.cpu();
    all_reduce_async(host, op)->wait();
    t.copy_(host);
    return std::make_unique<CompletedOp>();
  }
  ++counts_.all_reduce;
  std::vector<at::Tensor> tensors{t};
  c10d::AllreduceOptions opts;
  opts.reduceOp = to_c10d(op);
  Work work = impl_->group->allreduce(tensors, opts);
  return std::make_unique<GlooPendingOp>(std::move(work), t,
                                         op == ReduceOp::Average ? impl_->size : 1);
}

void GlooCommunicator::all_reduce(at::Tensor& t, ReduceOp op) { all_reduce_async(t, op)->wait(); }

void GlooCommunicator::broadcast(at::Tensor& t, int root) {
  TORCH_CHECK(root >= 0 && root < impl_->size, "broadcast from rank ", root, " in a world of ",
              impl_->size, " ranks");
  if (t.is_cuda()) {
    at::Tensor host = t.cpu();
    broadcast(host, root);
    t.copy_(host);
    return;
  }
  ++counts_.broadcast;
  std::vector<at::Tensor> tensors{t};
  c10d::BroadcastOptions opts;
  opts.rootRank = root;
  wait_for(impl_->group->broadcast(tensors, opts), "broadcast");
}

std::vector<at::Tensor> GlooCommunicator::all_gather(const at::Tensor& t) {
  if (t.is_cuda()) {
    std::vector<at::Tensor> parts = all_gather(t.cpu());
    for (at::Tensor& part : parts) part = part.to(t.device());
    return parts;
  }
  ++counts_.all_gather;
  return c10d_all_gather(*impl_->group, impl_->size, t, [](const Work& work) { wait_for(work, "all_gather"); });
}

void GlooCommunicator::barrier() {
  ++counts_.barrier;
  wait_for(impl_->group->barrier(), "barrier");
}

}  // namespace accel
