// Which samples each rank reads in one epoch, batch by batch, and which of
// them are padding duplicates; pure index arithmetic, so a resumed epoch
// skips the batches already read without loading them.
//
// The epoch's order L is shuffled_order(n, seed, epoch) (PyTorch's randperm
// for seed + epoch, engine/data/shuffled_order.h; 0..n-1 without shuffle). Positions p >= start of the list are shared out: rank r
// reads p = start + r, start + r + W, ..., and position p holds L[p mod n],
// so positions past n repeat the order from its start (the padding). Rank
// r's batch k is its positions k*B .. k*B + B - 1, so step k over all ranks
// covers the consecutive positions start + k*B*W .. start + (k+1)*B*W - 1:
// W ranks at batch B read what one rank at batch W*B reads, and resuming at
// start = c with any world size or batch size continues the same list.
//
// How far the list runs, with m = n - start positions left:
//   even_batches (default): ceil(m / W) per rank, padded, so every rank has
//     the same number of batches; the last batch may be smaller than B but
//     has the same size on every rank. At most one padding sample per rank,
//     always the last row of its last batch.
//   even_batches = false: no padding; rank r reads ceil((m - r) / W), so
//     ranks may have one sample (and one batch) fewer than others.
//   drop_last: floor(m / W) per rank, and only whole batches; no padding.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace accel::data {

struct ShardLayout {
  int64_t dataset_size = 0;
  int64_t world_size = 1;
  int64_t rank = 0;
  int64_t batch_size = 1;  // per rank
  bool shuffle = false;
  int64_t seed = 0;
  bool drop_last = false;
  bool even_batches = true;
};

class EpochPlan {
 public:
  // `start`: positions of the epoch's list consumed before (0 for a fresh
  // epoch, at most dataset_size). Errors name the invalid argument.
  EpochPlan(const ShardLayout& layout, int64_t epoch, int64_t start = 0);

  const ShardLayout& layout() const { return layout_; }
  int64_t epoch() const { return epoch_; }
  int64_t start() const { return start_; }

  // Batches of `rank` (default: this rank) in this plan.
  int64_t num_batches(int64_t rank) const;
  int64_t num_batches() const { return num_batches(layout_.rank); }
  // Samples of `rank` in its batches.
  int64_t num_samples(int64_t rank) const;

  // This rank's sample indices (0-based int64) for its batches from
  // `first_batch` (0-based) on, in reading order: batch first_batch + k is
  // rows k*B .. min((k+1)*B, size) - 1. Earlier batches are skipped by
  // arithmetic, not computed.
  at::Tensor indices(int64_t first_batch = 0) const;

  // How many rows at the tail of every rank's batch k (0-based) are padding
  // duplicates, by rank; the same on every rank.
  std::vector<int64_t> padding(int64_t batch) const;

  // List position reached after `batches` steps of this plan (each step is
  // one batch on every rank), capped at the data set size; a later plan
  // started there continues this one exactly.
  int64_t position_after(int64_t batches) const;

 private:
  // Samples `rank` reads before whole-batch truncation.
  int64_t shard_size(int64_t rank) const;

  ShardLayout layout_;
  int64_t epoch_;
  int64_t start_;
};

}  // namespace accel::data
