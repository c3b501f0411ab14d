// Which samples each rank reads in an epoch, with the semantics of PyTorch's
// torch.utils.data.DistributedSampler (same permutation for the same seed and epoch,
// same padding, same sharding), so a run here reads exactly the samples the
// PyTorch run reads.
//
// An epoch's order: a permutation of 0..n-1 (from a CPU generator seeded with
// seed + epoch; identity without shuffle), padded by repeating from its start up to
// a multiple of the world size W (or truncated to one with drop_last). Rank r takes
// positions r, r+W, r+2W, ... of that list.
//
// Why interleaved rather than contiguous shards: with batch size B per rank, rank r's
// k-th batch holds positions (k*B + j)*W + r for j < B, so over all ranks batch k
// covers exactly positions k*B*W .. (k+1)*B*W - 1: the k-th batch of one process
// reading the same list with batch size W*B. With the loss averaged per batch and
// gradients averaged over ranks, R ranks at batch B therefore follow the same
// trajectory as 1 rank at batch R*B (up to floating-point summation order). The one
// difference is padding: the last global batch also holds the padding duplicates,
// which `num_padding` reports so metrics can drop them.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>

namespace accel {

struct RankShard {
  at::Tensor indices;   // int64, 0-based dataset indices, in reading order
  int64_t num_padding;  // how many of them are padding duplicates (always the last ones)
  int64_t total_size;   // length of the padded or truncated list over all ranks
};

class DistributedSampler {
 public:
  // Errors, naming the argument, unless dataset_size >= 0, world_size >= 1 and
  // 0 <= rank < world_size.
  DistributedSampler(int64_t dataset_size, int64_t world_size, int64_t rank, bool shuffle = true,
                     int64_t seed = 0, bool drop_last = false);

  // All ranks must use the same epoch (and seed) for their shards to partition the
  // list; a new epoch gives a new permutation.
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }

  // Samples per rank per epoch (the same on every rank).
  int64_t num_samples() const { return num_samples_; }
  int64_t total_size() const { return num_samples_ * world_size_; }

  // This rank's samples for the current epoch.
  RankShard shard() const;

 private:
  int64_t dataset_size_;
  int64_t world_size_;
  int64_t rank_;
  bool shuffle_;
  int64_t seed_;
  int64_t num_samples_;
  int64_t epoch_ = 0;
};

}  // namespace accel
