#include "engine/data/epoch_plan.h"

#include <algorithm>

#include "engine/data/shuffled_order.h"

namespace accel::data {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return a <= 0 ? 0 : (a + b - 1) / b; }

}  // namespace

EpochPlan::EpochPlan(const ShardLayout& layout, int64_t epoch, int64_t start)
    : layout_(layout), epoch_(epoch), start_(start) {
  TORCH_CHECK(layout.dataset_size >= 0, "EpochPlan: dataset_size must be >= 0, got ",
              layout.dataset_size);
  TORCH_CHECK(layout.world_size >= 1, "EpochPlan: world_size must be >= 1, got ",
              layout.world_size);
  TORCH_CHECK(layout.rank >= 0 && layout.rank < layout.world_size, "EpochPlan: rank ", layout.rank,
              " is not in [0, ", layout.world_size - 1, "]");
  TORCH_CHECK(layout.batch_size >= 1, "EpochPlan: batch_size must be >= 1, got ",
              layout.batch_size);
  TORCH_CHECK(epoch >= 0, "EpochPlan: epoch must be >= 0, got ", epoch);
  TORCH_CHECK(start >= 0 && start <= layout.dataset_size, "EpochPlan: start ", start,
              " is not in [0, ", layout.dataset_size, "]");
}

int64_t EpochPlan::shard_size(int64_t rank) const {
  const int64_t left = layout_.dataset_size - start_, world = layout_.world_size;
  if (layout_.drop_last) return left / world;
  if (layout_.even_batches) return ceil_div(left, world);
  return ceil_div(left - rank, world);
}

int64_t EpochPlan::num_batches(int64_t rank) const {
  const int64_t size = shard_size(rank);
  return layout_.drop_last ? size / layout_.batch_size : ceil_div(size, layout_.batch_size);
}

int64_t EpochPlan::num_samples(int64_t rank) const {
  return layout_.drop_last ? num_batches(rank) * layout_.batch_size : shard_size(rank);
}

at::Tensor EpochPlan::indices(int64_t first_batch) const {
  TORCH_CHECK(first_batch >= 0, "EpochPlan: first_batch must be >= 0, got ", first_batch);
  const int64_t n = layout_.dataset_size;
  const int64_t count = num_samples(layout_.rank);
  const int64_t first = std::min(count, first_batch * layout_.batch_size);
  if (first == count) return at::empty({0}, at::kLong);
  at::Tensor positions = at::arange(first, count, at::kLong)
                             .mul_(layout_.world_size)
                             .add_(start_ + layout_.rank)
                             .remainder_(n);
  if (!layout_.shuffle) return positions;
  return shuffled_order(n, layout_.seed, epoch_).index_select(0, positions);
}

std::vector<int64_t> EpochPlan::padding(int64_t batch) const {
  const int64_t n = layout_.dataset_size, world = layout_.world_size, b = layout_.batch_size;
  std::vector<int64_t> out(static_cast<size_t>(world), 0);
  for (int64_t r = 0; r < world; ++r) {
    const int64_t first = batch * b, end = std::min(num_samples(r), first + b);
    // Rank r's j-th sample sits at position start + r + j*W: padding from
    // the first j that reaches n.
    const int64_t first_padding = std::max<int64_t>(0, ceil_div(n - start_ - r, world));
    out[static_cast<size_t>(r)] = std::max<int64_t>(0, end - std::max(first, first_padding));
  }
  return out;
}

int64_t EpochPlan::position_after(int64_t batches) const {
  return std::min(layout_.dataset_size,
                  start_ + batches * layout_.batch_size * layout_.world_size);
}

}  // namespace accel::data
