#include "engine/comm/nccl_communicator.h"

#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "engine/comm/c10d_all_gather.h"
#include "engine/comm/flat_collective_args.h"
#include "engine/process_state.h"
#include "engine/comm/c10d_store.h"

namespace accel {
namespace {

using Work = c10::intrusive_ptr<c10d::Work>;

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

// Blocks until `work` is done or `timeout` passes (c10d's wait with an
// explicit timeout waits on the host), turning NCCL's failures into
// CollectiveError; the monitor above turns a failure at the timeout into
// a CollectiveTimeout that names the missing ranks.
void wait_for(const Work& work, const char* operation, std::chrono::milliseconds timeout) {
  try {
    work->wait(timeout);
  } catch (const std::exception& e) {
    throw CollectiveError(std::string(operation) + " failed: " + e.what());
  }
}

class NcclPendingOp final : public PendingOp {
 public:
  NcclPendingOp(Work work, const char* operation, std::chrono::milliseconds timeout)
      : work_(std::move(work)), operation_(operation), timeout_(timeout) {}
  void wait() override { wait_for(work_, operation_, timeout_); }

 private:
  Work work_;
  const char* operation_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

struct NcclCommunicator::Impl {
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> group;
  std::chrono::milliseconds timeout{0};
  int rank = 0;
  int size = 1;
};

NcclCommunicator::NcclCommunicator(const ProcessState& state, const CommunicatorOptions& options,
                                   const std::string& store_prefix, int group_rank, int group_size)
    : impl_(std::make_unique<Impl>()) {
  TORCH_CHECK(state.master_port > 0, "the nccl backend needs MASTER_PORT: start the run with accel-run");
  TORCH_CHECK(options.cuda_device >= 0,
              "the nccl backend reduces CUDA tensors, and this rank has no GPU (device cpu)");
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(options.cuda_device));
  auto store = c10::make_intrusive<C10dStore>(state.store_address(), options.timeout);
  auto prefixed = c10::make_intrusive<c10d::PrefixStore>(store_prefix, store);
  auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
  nccl_options->timeout = options.timeout;
  nccl_options->group_name = store_prefix;  // c10d's own messages (its watchdog's) then name the group
  impl_->group = c10::make_intrusive<c10d::ProcessGroupNCCL>(prefixed, group_rank, group_size, nccl_options);
  impl_->timeout = options.timeout;
  impl_->rank = group_rank;
  impl_->size = group_size;
}

NcclCommunicator::~NcclCommunicator() = default;

int NcclCommunicator::rank() const { return impl_->rank; }
int NcclCommunicator::size() const { return impl_->size; }

std::unique_ptr<PendingOp> NcclCommunicator::all_reduce_async(at::Tensor& t, ReduceOp op) {
  require_cuda(t, "all_reduce");
  ++counts_.all_reduce;
  std::vector<at::Tensor> tensors{t};
  c10d::AllreduceOptions opts;
  opts.reduceOp = to_c10d(op);
  return std::make_unique<NcclPendingOp>(impl_->group->allreduce(tensors, opts), "all_reduce",
                                         impl_->timeout);
}

void NcclCommunicator::all_reduce(at::Tensor& t, ReduceOp op) { all_reduce_async(t, op)->wait(); }

void NcclCommunicator::broadcast(at::Tensor& t, int root) {
  require_cuda(t, "broadcast");
  TORCH_CHECK(root >= 0 && root < impl_->size, "broadcast from rank ", root, " in a world of ",
              impl_->size, " ranks");
  ++counts_.broadcast;
  std::vector<at::Tensor> tensors{t};
  c10d::BroadcastOptions opts;
  opts.rootRank = root;
  wait_for(impl_->group->broadcast(tensors, opts), "broadcast", impl_->timeout);
}

std::vector<at::Tensor> NcclCommunicator::all_gather(const at::Tensor& t) {
  require_cuda(t, "all_gather");
  ++counts_.all_gather;
  const auto timeout = impl_->timeout;
  return c10d_all_gather(*impl_->group, impl_->size, t,
                         [timeout](const Work& work) { wait_for(work, "all_gather", timeout); });
}

// c10d's flat-buffer forms, which are one ncclReduceScatter and one
// ncclAllGather (in place when the input is the rank's slice of the output,
// as NCCL allows).
void NcclCommunicator::reduce_scatter(at::Tensor& output, at::Tensor& input, ReduceOp op) {
  require_cuda(output, "reduce_scatter");
  check_reduce_scatter_args(output, input, impl_->size, op);
  ++counts_.reduce_scatter;
  c10d::ReduceScatterOptions opts;
  opts.reduceOp = to_c10d(op);
  wait_for(impl_->group->_reduce_scatter_base(output, input, opts), "reduce_scatter", impl_->timeout);
}

void NcclCommunicator::all_gather_into(at::Tensor& output, const at::Tensor& input) {
  all_gather_into_async(output, input)->wait();
}

std::unique_ptr<PendingOp> NcclCommunicator::all_gather_into_async(at::Tensor& output,
                                                                   const at::Tensor& input) {
  require_cuda(output, "all_gather_into");
  check_all_gather_into_args(output, input, impl_->size, impl_->rank);
  ++counts_.all_gather;
  at::Tensor sent = input;  // c10d takes it by non-const reference, and only reads it
  return std::make_unique<NcclPendingOp>(impl_->group->_allgather_base(output, sent), "all_gather_into",
                                         impl_->timeout);
}

void NcclCommunicator::barrier() {
  ++counts_.barrier;
  wait_for(impl_->group->barrier(), "barrier", impl_->timeout);
}

// Coalesced, c10d puts both on the group's own NCCL communicator, where
// every member of a ring posts its pair in the same order (without it each
// pair of peers would get a communicator of its own, made lazily, and two
// neighbours each sending first could wait on each other).
void NcclCommunicator::send_recv(const at::Tensor& send, int to, at::Tensor& recv, int from) {
  TORCH_CHECK(to >= 0 && to < impl_->size && from >= 0 && from < impl_->size, "send_recv to rank ", to,
              " and from rank ", from, " in a group of ", impl_->size, " ranks");
  require_cuda(send, "send_recv");
  require_cuda(recv, "send_recv");
  TORCH_CHECK(recv.is_contiguous(), "send_recv receives into a contiguous tensor");
  TORCH_CHECK(send.scalar_type() == recv.scalar_type(), "send_recv sends ", send.scalar_type(),
              " but receives into ", recv.scalar_type());
  constexpr int kTag = 0;  // NCCL matches sends and recvs by order, not by tag
  std::vector<at::Tensor> outgoing{send.contiguous()};
  std::vector<at::Tensor> incoming{recv};
  impl_->group->startCoalescing();
  impl_->group->send(outgoing, to, kTag);
  impl_->group->recv(incoming, from, kTag);
  // No work back means c10d queued both on the current stream, where what
  // follows waits for them anyway.
  if (Work both = impl_->group->endCoalescing()) wait_for(both, "send_recv", impl_->timeout);
}

}  // namespace accel
