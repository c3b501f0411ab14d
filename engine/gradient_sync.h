// Averages parameter gradients across ranks after backward.
//
// Gradients are packed into buckets of at most `bucket_bytes` so a model of
// many small tensors costs a few large all-reduces rather than one per
// tensor; every bucket's all-reduce is started before any is waited for.
// Bucketing is decided once from the parameter list, identically on every
// rank, so all ranks issue the same collectives in the same order.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace accel {

class Communicator;

class GradientSync {
 public:
  static constexpr int64_t kDefaultBucketBytes = 25 * 1024 * 1024;

  GradientSync(Communicator& comm, std::vector<at::Tensor> params,
               int64_t bucket_bytes = kDefaultBucketBytes);

  // Replaces each parameter's gradient by its average over all ranks. A
  // parameter without a gradient on this rank (unused in its forward)
  // contributes zeros, so ranks never disagree on what they send.
  void synchronize();

  int64_t num_buckets() const { return static_cast<int64_t>(buckets_.size()); }

 private:
  struct Bucket {
    std::vector<size_t> params;  // indices into params_
    at::Tensor buffer;           // flat, one dtype
  };

  Communicator& comm_;
  std::vector<at::Tensor> params_;
  std::vector<Bucket> buckets_;
};

}  // namespace accel
