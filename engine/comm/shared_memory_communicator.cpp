#include "engine/comm/shared_memory_communicator.h"

#include <ATen/ATen.h>

#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <random>

#include "engine/formats/fault_injection.h"
#include "engine/comm/flat_collective_args.h"
#include "engine/comm/host_staging.h"

namespace accel {

SharedMemoryCommunicator::SharedMemoryCommunicator(std::unique_ptr<Communicator> inner,
                                                   std::chrono::milliseconds timeout,
                                                   const std::string& name_prefix)
    : inner_(std::move(inner)) {
  const CollectiveCounts before = inner_->counts();
  join(timeout, name_prefix);
  joining_ = inner_->counts() - before;
}

void SharedMemoryCommunicator::join(std::chrono::milliseconds timeout, const std::string& name_prefix) {
  const int rank = inner_->rank();
  const int size = inner_->size();
  auto attempt = [&](auto&& make) {
    try {
      segment_ = make();
    } catch (const std::runtime_error& e) {
      std::fprintf(stderr, "accel: rank %d: %s; all-reduces take Gloo's TCP path\n", rank, e.what());
    }
  };
  SharedMemoryAllReduce::Options options;
  options.timeout = timeout;
  cpu_set_t cpus;
  options.spin = ::sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) >= size;
  if (!name_prefix.empty()) options.name_prefix = name_prefix;

  at::Tensor token = at::zeros({2}, at::kLong);  // {created, token}
  if (rank == 0) {
    const uint64_t value = (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
    attempt([&] { return SharedMemoryAllReduce::create(size, value, options); });
    formats::fault_point("shared-memory-created");
    token[0] = segment_ ? 1 : 0;
    token[1] = static_cast<int64_t>(value);
  }
  inner_->broadcast(token, 0);
  if (rank != 0 && token[0].item<int64_t>() == 1) {
    const auto value = static_cast<uint64_t>(token[1].item<int64_t>());
    attempt([&] { return SharedMemoryAllReduce::open(rank, size, value, options); });
  }
  at::Tensor joined = at::full({1}, segment_ ? 1 : 0, at::kLong);
  inner_->all_reduce(joined, ReduceOp::Min);
  if (segment_) segment_->unlink_name();
  if (joined.item<int64_t>() == 0) segment_.reset();
}

void SharedMemoryCommunicator::all_reduce(at::Tensor& t, ReduceOp op) { all_reduce_async(t, op)->wait(); }

std::unique_ptr<PendingOp> SharedMemoryCommunicator::all_reduce_async(at::Tensor& t, ReduceOp op) {
  if (!segment_) return inner_->all_reduce_async(t, op);
  // CUDA tensors (ranks sharing one GPU, which NCCL refuses) go through
  // host copies, so the segment serves them too.
  if (t.is_cuda()) {
    at::Tensor host = t.cpu();
    all_reduce_async(host, op)->wait();
    t.copy_(host);
    return std::make_unique<CompletedOp>();
  }
  if (!SharedMemoryAllReduce::supports(t)) return inner_->all_reduce_async(t, op);
  ++counts_.all_reduce;
  segment_->all_reduce(t, op);
  ++counts_.all_reduce_shared_memory;
  return std::make_unique<CompletedOp>();
}

void SharedMemoryCommunicator::reduce_scatter(at::Tensor& output, at::Tensor& input, ReduceOp op) {
  if (!segment_) return inner_->reduce_scatter(output, input, op);
  check_reduce_scatter_args(output, input, size(), op);
  if (output.is_cuda()) {
    on_host(output, input, [&](at::Tensor& host_output, at::Tensor& host_input) {
      reduce_scatter(host_output, host_input, op);
    });
    return;
  }
  if (!SharedMemoryAllReduce::supports(output)) return inner_->reduce_scatter(output, input, op);
  ++counts_.reduce_scatter;
  counts_.reduce_scatter_bytes += static_cast<int64_t>(input.nbytes());
  segment_->reduce_scatter(output, input, op);
}

void SharedMemoryCommunicator::all_gather_into(at::Tensor& output, const at::Tensor& input) {
  all_gather_into_async(output, input)->wait();
}

std::unique_ptr<PendingOp> SharedMemoryCommunicator::all_gather_into_async(at::Tensor& output,
                                                                           const at::Tensor& input) {
  if (!segment_) return inner_->all_gather_into_async(output, input);
  check_all_gather_into_args(output, input, size(), rank());
  if (output.is_cuda()) {
    on_host(output, input, [&](at::Tensor& host_output, at::Tensor& host_input) {
      all_gather_into(host_output, host_input);
    });
    return std::make_unique<CompletedOp>();
  }
  if (!SharedMemoryAllReduce::supports(output)) return inner_->all_gather_into_async(output, input);
  ++counts_.all_gather;
  counts_.all_gather_bytes += static_cast<int64_t>(output.nbytes());
  segment_->all_gather(output, input);
  return std::make_unique<CompletedOp>();
}

CollectiveCounts SharedMemoryCommunicator::counts() const {
  return inner_->counts() - joining_ + counts_;
}

}  // namespace accel
