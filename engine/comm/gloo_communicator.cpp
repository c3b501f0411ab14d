#include "engine/comm/gloo_communicator.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "engine/comm/c10d_group.h"
#include "engine/comm/flat_collective_args.h"
#include "engine/comm/host_staging.h"
#include "engine/process_state.h"

namespace accel {
namespace {

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

// Gloo (LibTorch 1.13's) reduces no bfloat16: such tensors are reduced as
// float32 copies, which the caller copies back.
at::Tensor reducible(const at::Tensor& t) {
  return t.scalar_type() == at::kBFloat16 ? t.to(at::kFloat) : t;
}

}  // namespace

// Gloo's work fails within the group's own timeout: waits need none of theirs.
struct GlooCommunicator::Impl : C10dGroup<c10d::ProcessGroupGloo> {
  using C10dGroup::C10dGroup;
};

GlooCommunicator::GlooCommunicator(const ProcessState& state, const CommunicatorOptions& options)
    : GlooCommunicator(state, options, "gloo", state.rank, state.world_size) {}

GlooCommunicator::GlooCommunicator(const ProcessState& state, const CommunicatorOptions& options,
                                   const std::string& store_prefix, int group_rank, int group_size)
{
  auto prefixed = c10d_rendezvous_store(state, options, store_prefix, "gloo");
  auto gloo_options = c10d::ProcessGroupGloo::Options::create();
  gloo_options->timeout = options.timeout;
  // On one machine, loopback avoids a hostname that may not resolve.
  gloo_options->devices.push_back(
      is_loopback(state.master_addr)
          ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
          : c10d::ProcessGroupGloo::createDefaultDevice());
  impl_ = std::make_unique<Impl>(
      c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, group_rank, group_size, gloo_options), group_rank,
      group_size, std::chrono::milliseconds(0));
}

GlooCommunicator::~GlooCommunicator() = default;

int GlooCommunicator::rank() const { return impl_->rank(); }
int GlooCommunicator::size() const { return impl_->size(); }

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
  C10dWork work = impl_->start_all_reduce(wire, to_c10d(op));
  const int average_over = op == ReduceOp::Average ? impl_->size() : 1;
  return impl_->pending(std::move(work), "all_reduce", [t, wire, average_over]() mutable {
    if (!wire.is_same(t)) t.copy_(wire);
    if (average_over > 1) t.div_(average_over);
  });
}

void GlooCommunicator::all_reduce(at::Tensor& t, ReduceOp op) { all_reduce_async(t, op)->wait(); }

void GlooCommunicator::broadcast(at::Tensor& t, int root) {
  impl_->check_root(root);
  if (t.is_cuda()) {
    at::Tensor host = t.cpu();
    broadcast(host, root);
    t.copy_(host);
    return;
  }
  ++counts_.broadcast;
  impl_->broadcast(t, root);
}

std::vector<at::Tensor> GlooCommunicator::all_gather(const at::Tensor& t) {
  if (t.is_cuda()) {
    std::vector<at::Tensor> parts = all_gather(t.cpu());
    for (at::Tensor& part : parts) part = part.to(t.device());
    return parts;
  }
  ++counts_.all_gather;
  counts_.all_gather_bytes += static_cast<int64_t>(t.nbytes()) * impl_->size();
  return impl_->all_gather(t);
}

// c10d 1.13's ProcessGroupGloo has no reduce-scatter (it throws "does not
// support reduce_scatter"), so this is an all-reduce of the whole input, of
// which the rank keeps its slice: the same result for twice the traffic of a
// true reduce-scatter (a ring all-reduce is a reduce-scatter followed by an
// all-gather). Ranks of one machine never get here: the shared memory
// communicator above does its own (engine/comm/shared_memory_communicator.h).
void GlooCommunicator::reduce_scatter(at::Tensor& output, at::Tensor& input, ReduceOp op) {
  check_reduce_scatter_args(output, input, impl_->size(), op);
  if (output.is_cuda()) {
    on_host(output, input, [&](at::Tensor& host_output, at::Tensor& host_input) {
      reduce_scatter(host_output, host_input, op);
    });
    return;
  }
  ++counts_.reduce_scatter;
  counts_.reduce_scatter_bytes += static_cast<int64_t>(input.nbytes());
  at::Tensor wire = reducible(input);
  impl_->wait(impl_->start_all_reduce(wire, to_c10d(op)), "reduce_scatter");
  output.copy_(rank_slice(wire, impl_->rank(), output.numel()));
  if (op == ReduceOp::Average) output.div_(impl_->size());
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
  check_all_gather_into_args(output, input, impl_->size(), impl_->rank());
  if (output.is_cuda()) {
    on_host(output, input, [&](at::Tensor& host_output, at::Tensor& host_input) {
      all_gather_into(host_output, host_input);
    });
    return std::make_unique<CompletedOp>();
  }
  ++counts_.all_gather;
  counts_.all_gather_bytes += static_cast<int64_t>(output.nbytes());
  std::vector<at::Tensor> inputs{input.view(at::kByte)};
  const at::Tensor output_bytes = output.view(at::kByte);
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int r = 0; r < impl_->size(); ++r) {
    outputs[0].push_back(rank_slice(output_bytes, r, inputs[0].numel()));
  }
  return impl_->pending(impl_->group().allgather(outputs, inputs), "all_gather_into");
}

void GlooCommunicator::barrier() {
  ++counts_.barrier;
  impl_->barrier();
}

// Gloo moves the bytes as they are, whatever the dtype; c10d waits for them
// within the group's timeout. CUDA tensors (ranks sharing a GPU) travel
// through host copies, which the pending op keeps alive.
std::unique_ptr<PendingOp> GlooCommunicator::isend(const at::Tensor& t, int to, int tag) {
  impl_->check_peer(to, "send to");
  std::vector<at::Tensor> outgoing{t.is_cuda() ? t.cpu() : t.contiguous()};
  return impl_->pending(impl_->group().send(outgoing, to, tag), "send");
}

std::unique_ptr<PendingOp> GlooCommunicator::irecv(at::Tensor& t, int from, int tag) {
  impl_->check_peer(from, "recv from");
  TORCH_CHECK(t.is_contiguous(), "recv receives into a contiguous tensor");
  std::vector<at::Tensor> incoming{t.is_cuda() ? at::empty(t.sizes(), t.options().device(at::kCPU)) : t};
  std::function<void()> finish;
  if (t.is_cuda()) finish = [t, host = incoming[0]]() mutable { t.copy_(host); };
  return impl_->pending(impl_->group().recv(incoming, from, tag), "recv", std::move(finish));
}

}  // namespace accel
