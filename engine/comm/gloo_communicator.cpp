#include "engine/comm/gloo_communicator.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <functional>

#include "engine/comm/c10d_all_gather.h"
#include "engine/comm/flat_collective_args.h"
#include "engine/comm/host_staging.h"
#include "engine/process_state.h"
#include "engine/comm/c10d_store.h"

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

// A c10d operation in flight; `finish` runs once it has completed.
class GlooPendingOp final : public PendingOp {
 public:
  GlooPendingOp(Work work, const char* operation, std::function<void()> finish = {})
      : work_(std::move(work)), operation_(operation), finish_(std::move(finish)) {}
  void wait() override {
    wait_for(work_, operation_);
    if (finish_) finish_();
  }

 private:
  Work work_;
  const char* operation_;
  std::function<void()> finish_;
};

// Gloo (LibTorch 1.13's) reduces no bfloat16: such tensors are reduced as
// float32 copies, which the caller copies back.
at::Tensor reducible(const at::Tensor& t) {
  return t.scalar_type() == at::kBFloat16 ? t.to(at::kFloat) : t;
}

// Starts an all-reduce of `t`; an average still has to be divided.
Work start_all_reduce(c10d::ProcessGroupGloo& group, at::Tensor& t, ReduceOp op) {
  std::vector<at::Tensor> tensors{t};
  c10d::AllreduceOptions opts;
  opts.reduceOp = to_c10d(op);
  return group.allreduce(tensors, opts);
}

}  // namespace

struct GlooCommunicator::Impl {
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  int rank = 0;
  int size = 1;
};

GlooCommunicator::GlooCommunicator(const ProcessState& state, const CommunicatorOptions& options)
    : GlooCommunicator(state, options, "gloo", state.rank, state.world_size) {}

GlooCommunicator::GlooCommunicator(const ProcessState& state, const CommunicatorOptions& options,
                                   const std::string& store_prefix, int group_rank, int group_size)
    : impl_(std::make_unique<Impl>()) {
  TORCH_CHECK(state.master_port > 0,
              "the gloo backend needs MASTER_PORT: start the run with accel-run");
  auto store = c10::make_intrusive<C10dStore>(state.store_address(), options.timeout);
  auto prefixed = c10::make_intrusive<c10d::PrefixStore>(store_prefix, store);
  auto gloo_options = c10d::ProcessGroupGloo::Options::create();
  gloo_options->timeout = options.timeout;
  // On one machine, loopback avoids a hostname that may not resolve.
  gloo_options->devices.push_back(
      is_loopback(state.master_addr)
          ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
          : c10d::ProcessGroupGloo::createDefaultDevice());
  impl_->group = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, group_rank, group_size,
                                                             gloo_options);
  impl_->rank = group_rank;
  impl_->size = group_size;
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
  at::Tensor wire = reducible(t);
  Work work = start_all_reduce(*impl_->group, wire, op);
  const int average_over = op == ReduceOp::Average ? impl_->size : 1;
  return std::make_unique<GlooPendingOp>(std::move(work), "all_reduce", [t, wire, average_over]() mutable {
    if (!wire.is_same(t)) t.copy_(wire);
    if (average_over > 1) t.div_(average_over);
  });
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

// c10d 1.13's ProcessGroupGloo has no reduce-scatter (it throws "does not
// support reduce_scatter"), so this is an all-reduce of the whole input, of
// which the rank keeps its slice: the same result for twice the traffic of a
// true reduce-scatter (a ring all-reduce is a reduce-scatter followed by an
// all-gather). Ranks of one machine never get here: the shared memory
// communicator above does its own (engine/comm/shared_memory_communicator.h).
void GlooCommunicator::reduce_scatter(at::Tensor& output, at::Tensor& input, ReduceOp op) {
  check_reduce_scatter_args(output, input, impl_->size, op);
  if (output.is_cuda()) {
    on_host(output, input, [&](at::Tensor& host_output, at::Tensor& host_input) {
      reduce_scatter(host_output, host_input, op);
    });
    return;
  }
  ++counts_.reduce_scatter;
  at::Tensor wire = reducible(input);
  wait_for(start_all_reduce(*impl_->group, wire, op), "reduce_scatter");
  output.copy_(rank_slice(wire, impl_->rank, output.numel()));
  if (op == ReduceOp::Average) output.div_(impl_->size);
}

void GlooCommunicator::all_gather_into(at::Tensor& output, const at::Tensor& input) {
  all_gather_into_async(output, input)->wait();
}

// c10d's Gloo gathers into a list of tensors: here, views of each rank's
// slice of `output`. Elements travel as bytes, which a gather carries
// unchanged whatever their type (Gloo has no bool). In place works as is:
// Gloo reads the input into a buffer of its own before it writes any output.
std::unique_ptr<PendingOp> GlooCommunicator::all_gather_into_async(at::Tensor& output,
                                                                   const at::Tensor& input) {
  check_all_gather_into_args(output, input, impl_->size, impl_->rank);
  if (output.is_cuda()) {
    on_host(output, input, [&](at::Tensor& host_output, at::Tensor& host_input) {
      all_gather_into(host_output, host_input);
    });
    return std::make_unique<CompletedOp>();
  }
  ++counts_.all_gather;
  std::vector<at::Tensor> inputs{input.view(at::kByte)};
  const at::Tensor output_bytes = output.view(at::kByte);
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int r = 0; r < impl_->size; ++r) {
    outputs[0].push_back(rank_slice(output_bytes, r, inputs[0].numel()));
  }
  return std::make_unique<GlooPendingOp>(impl_->group->allgather(outputs, inputs), "all_gather_into");
}

void GlooCommunicator::barrier() {
  ++counts_.barrier;
  wait_for(impl_->group->barrier(), "barrier");
}

// Gloo moves the bytes as they are, whatever the dtype; c10d waits for them
// within the group's timeout. Each pair of ranks has one exchange in flight
// at a time, so one tag serves them all.
void GlooCommunicator::send_recv(const at::Tensor& send, int to, at::Tensor& recv, int from) {
  TORCH_CHECK(to >= 0 && to < impl_->size && from >= 0 && from < impl_->size, "send_recv to rank ", to,
              " and from rank ", from, " in a group of ", impl_->size, " ranks");
  TORCH_CHECK(recv.is_contiguous(), "send_recv receives into a contiguous tensor");
  if (send.is_cuda() || recv.is_cuda()) {
    at::Tensor host = recv.cpu();
    send_recv(send.cpu(), to, host, from);
    recv.copy_(host);
    return;
  }
  constexpr int kTag = 0;
  std::vector<at::Tensor> outgoing{send.contiguous()};
  std::vector<at::Tensor> incoming{recv};
  Work sent = impl_->group->send(outgoing, to, kTag);
  Work received = impl_->group->recv(incoming, from, kTag);
  wait_for(sent, "send");
  wait_for(received, "recv");
}

}  // namespace accel
