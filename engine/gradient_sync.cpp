#include "engine/gradient_sync.h"

#include <ATen/ATen.h>

#include <memory>

#include "engine/communicator.h"

namespace accel {

GradientSync::GradientSync(Communicator& comm, std::vector<at::Tensor> params,
                           int64_t bucket_bytes)
    : comm_(comm), params_(std::move(params)) {
  TORCH_CHECK(bucket_bytes > 0, "bucket size must be positive, got ", bucket_bytes);
  int64_t filled = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    const at::Tensor& p = params_[i];
    int64_t bytes = p.numel() * static_cast<int64_t>(p.element_size());
    bool fits = !buckets_.empty() && filled + bytes <= bucket_bytes &&
                params_[buckets_.back().params.front()].scalar_type() == p.scalar_type();
    if (!fits) {
      buckets_.emplace_back();
      filled = 0;
    }
    buckets_.back().params.push_back(i);
    filled += bytes;
  }
  for (Bucket& bucket : buckets_) {
    int64_t numel = 0;
    for (size_t i : bucket.params) numel += params_[i].numel();
    bucket.buffer = at::empty({numel}, params_[bucket.params.front()].options().requires_grad(false));
  }
}

void GradientSync::synchronize() {
  if (comm_.size() == 1) return;
  at::NoGradGuard no_grad;
  std::vector<std::unique_ptr<PendingOp>> pending;
  pending.reserve(buckets_.size());
  for (Bucket& bucket : buckets_) {
    int64_t offset = 0;
    for (size_t i : bucket.params) {
      const at::Tensor& p = params_[i];
      at::Tensor slot = bucket.buffer.narrow(0, offset, p.numel());
      const at::Tensor& grad = p.grad();
      if (grad.defined()) {
        slot.view(p.sizes()).copy_(grad);
      } else {
        slot.zero_();
      }
      offset += p.numel();
    }
    pending.push_back(comm_.all_reduce_async(bucket.buffer, ReduceOp::Average));
  }
  for (size_t b = 0; b < buckets_.size(); ++b) {
    pending[b]->wait();
    int64_t offset = 0;
    for (size_t i : buckets_[b].params) {
      at::Tensor& p = params_[i];
      at::Tensor averaged = buckets_[b].buffer.narrow(0, offset, p.numel()).view(p.sizes());
      if (p.grad().defined()) {
        p.mutable_grad().copy_(averaged);
      } else {
        p.mutable_grad() = averaged.clone();
      }
      offset += p.numel();
    }
  }
}

}  // namespace accel
