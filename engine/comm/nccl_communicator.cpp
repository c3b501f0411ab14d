#include "engine/comm/nccl_communicator.h"

#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "engine/comm/c10d_group.h"
#include "engine/comm/flat_collective_args.h"
#include "engine/process_state.h"

namespace accel {
namespace {

c10d::ReduceOp to_c10d(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return c10d::ReduceOp::SUM;
    case ReduceOp::Average:
      return c10d::ReduceOp::AVG;
    case ReduceOp::Max:
      return c10d::ReduceOp::MAX;
    case ReduceOp::Min:
      return c10d::ReduceOp::MIN;
  }
  TORCH_CHECK(false, "unknown reduce op");
}

void require_cuda(const at::Tensor& t, const char* operation) {
  TORCH_CHECK(t.is_cuda(), "nccl ", operation, ": the tensor is on ", t.device().str(),
              ", NCCL reduces CUDA tensors only");
}

}  // namespace

// Waits block this thread until NCCL finishes or the run's timeout passes
// (c10d's wait with an explicit timeout waits on the host).
struct NcclCommunicator::Impl : C10dGroup<c10d::ProcessGroupNCCL> {
  using C10dGroup::C10dGroup;
};

NcclCommunicator::NcclCommunicator(const ProcessState& state, const CommunicatorOptions& options,
                                   const std::string& store_prefix, int group_rank, int group_size)
{
  TORCH_CHECK(state.master_port > 0, "the nccl backend needs MASTER_PORT: start the run with accel-run");
  TORCH_CHECK(options.cuda_device >= 0,
              "the nccl backend reduces CUDA tensors, and this rank has no GPU (device cpu)");
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(options.cuda_device));
  auto prefixed = c10d_rendezvous_store(state, options, store_prefix, "nccl");
  auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
  nccl_options->timeout = options.timeout;
  nccl_options->group_name = store_prefix;  // c10d's own messages (its watchdog's) then name the group
  impl_ = std::make_unique<Impl>(
      c10::make_intrusive<c10d::ProcessGroupNCCL>(prefixed, group_rank, group_size, nccl_options), group_rank,
      group_size, options.timeout);
}

NcclCommunicator::~NcclCommunicator() = default;

int NcclCommunicator::rank() const { return impl_->rank(); }
int NcclCommunicator::size() const { return impl_->size(); }

std::unique_ptr<PendingOp> NcclCommunicator::all_reduce_async(at::Tensor& t, ReduceOp op) {
  require_cuda(t, "all_reduce");
  ++counts_.all_reduce;
  return impl_->pending(impl_->start_all_reduce(t, to_c10d(op)), "all_reduce");
}

void NcclCommunicator::all_reduce(at::Tensor& t, ReduceOp op) { all_reduce_async(t, op)->wait(); }

void NcclCommunicator::broadcast(at::Tensor& t, int root) {
  require_cuda(t, "broadcast");
  impl_->check_root(root);
  ++counts_.broadcast;
  impl_->broadcast(t, root);
}

std::vector<at::Tensor> NcclCommunicator::all_gather(const at::Tensor& t) {
  require_cuda(t, "all_gather");
  ++counts_.all_gather;
  counts_.all_gather_bytes += static_cast<int64_t>(t.nbytes()) * impl_->size();
  return impl_->all_gather(t);
}

// c10d's flat-buffer forms, which are one ncclReduceScatter and one
// ncclAllGather (in place when the input is the rank's slice of the output,
// as NCCL allows).
void NcclCommunicator::reduce_scatter(at::Tensor& output, at::Tensor& input, ReduceOp op) {
  require_cuda(output, "reduce_scatter");
  check_reduce_scatter_args(output, input, impl_->size(), op);
  ++counts_.reduce_scatter;
  counts_.reduce_scatter_bytes += static_cast<int64_t>(input.nbytes());
  c10d::ReduceScatterOptions opts;
  opts.reduceOp = to_c10d(op);
  impl_->wait(impl_->group()._reduce_scatter_base(output, input, opts), "reduce_scatter");
}

void NcclCommunicator::all_gather_into(at::Tensor& output, const at::Tensor& input) {
  all_gather_into_async(output, input)->wait();
}

std::unique_ptr<PendingOp> NcclCommunicator::all_gather_into_async(at::Tensor& output,
                                                                   const at::Tensor& input) {
  require_cuda(output, "all_gather_into");
  check_all_gather_into_args(output, input, impl_->size(), impl_->rank());
  ++counts_.all_gather;
  counts_.all_gather_bytes += static_cast<int64_t>(output.nbytes());
  at::Tensor sent = input;  // c10d takes it by non-const reference, and only reads it
  return impl_->pending(impl_->group()._allgather_base(output, sent), "all_gather_into");
}

void NcclCommunicator::barrier() {
  ++counts_.barrier;
  impl_->barrier();
}

// Coalesced, c10d puts both on the group's own NCCL communicator, where
// every member of a ring posts its pair in the same order (without it each
// pair of peers would get a communicator of its own, made lazily, and two
// neighbours each sending first could wait on each other).
void NcclCommunicator::send_recv(const at::Tensor& send, int to, at::Tensor& recv, int from) {
  impl_->check_peer(to, "send_recv to");
  impl_->check_peer(from, "send_recv from");
  TORCH_CHECK(recv.is_contiguous(), "send_recv receives into a contiguous tensor");
  require_cuda(send, "send_recv");
  require_cuda(recv, "send_recv");
  TORCH_CHECK(send.scalar_type() == recv.scalar_type(), "send_recv sends ", send.scalar_type(),
              " but receives into ", recv.scalar_type());
  constexpr int kTag = 0;  // NCCL matches sends and recvs by order, not by tag
  std::vector<at::Tensor> outgoing{send.contiguous()};
  std::vector<at::Tensor> incoming{recv};
  c10d::ProcessGroupNCCL& group = impl_->group();
  group.startCoalescing();
  group.send(outgoing, to, kTag);
  group.recv(incoming, from, kTag);
  // No work back means c10d queued both on the current stream, where what
  // follows waits for them anyway.
  if (C10dWork both = group.endCoalescing()) impl_->wait(both, "send_recv");
}

// Alone, not coalesced: c10d gives each pair of peers an NCCL communicator
// of its own, made at their first transfer, which suits a pipeline (each
// stage talks to its neighbours) but not a ring of isends (send_recv's job).
std::unique_ptr<PendingOp> NcclCommunicator::isend(const at::Tensor& t, int to, int tag) {
  impl_->check_peer(to, "send to");
  require_cuda(t, "send");
  std::vector<at::Tensor> outgoing{t.contiguous()};
  return impl_->pending(impl_->group().send(outgoing, to, tag), "send");
}

std::unique_ptr<PendingOp> NcclCommunicator::irecv(at::Tensor& t, int from, int tag) {
  impl_->check_peer(from, "recv from");
  require_cuda(t, "recv");
  TORCH_CHECK(t.is_contiguous(), "recv receives into a contiguous tensor");
  std::vector<at::Tensor> incoming{t};
  return impl_->pending(impl_->group().recv(incoming, from, tag), "recv");
}

}  // namespace accel
