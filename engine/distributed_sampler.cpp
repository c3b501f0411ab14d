#include "engine/distributed_sampler.h"

#include <ATen/CPUGeneratorImpl.h>

namespace accel {

DistributedSampler::DistributedSampler(int64_t dataset_size, int64_t world_size, int64_t rank,
                                       bool shuffle, int64_t seed, bool drop_last)
    : dataset_size_(dataset_size),
      world_size_(world_size),
      rank_(rank),
      shuffle_(shuffle),
      seed_(seed) {
  TORCH_CHECK(dataset_size >= 0, "DistributedSampler: dataset_size must be >= 0, got ",
              dataset_size);
  TORCH_CHECK(world_size >= 1, "DistributedSampler: world_size must be >= 1, got ", world_size);
  TORCH_CHECK(rank >= 0 && rank < world_size, "DistributedSampler: rank ", rank, " is not in [0, ",
              world_size - 1, "]");
  // drop_last keeps floor(n / W) per rank, otherwise ceil(n / W) with padding.
  num_samples_ =
      drop_last ? dataset_size / world_size : (dataset_size + world_size - 1) / world_size;
}

RankShard DistributedSampler::shard() const {
  const int64_t n = dataset_size_;
  const int64_t total = total_size();
  // Positions of this rank in the padded list; padding repeats the list from its
  // start, so position p holds list element p mod n.
  at::Tensor positions = at::arange(num_samples_, at::kLong).mul_(world_size_).add_(rank_);
  const int64_t num_padding = (positions >= n).sum().item<int64_t>();
  if (n > 0) positions.remainder_(n);

  at::Tensor indices = positions;
  if (shuffle_) {
    // As PyTorch's manual_seed, a negative seed is taken as its two's complement.
    const auto generator_seed = static_cast<uint64_t>(seed_) + static_cast<uint64_t>(epoch_);
    at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(generator_seed);
    indices = at::randperm(n, generator, at::kLong).index_select(0, positions);
  }
  return RankShard{indices, num_padding, total};
}

}  // namespace accel
