// The order in which an epoch reads a data set when it shuffles: PyTorch's
// randperm of 0..n-1 from a CPU generator seeded with seed + epoch, which is
// what torch.utils.data.DistributedSampler draws, so a run here reads the
// samples a PyTorch run reads (EpochPlan shares the order out over ranks).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace accel::data {

// int64 1-D; a negative seed counts as its two's complement, as PyTorch's manual_seed.
at::Tensor shuffled_order(int64_t n, int64_t seed, int64_t epoch = 0);

}  // namespace accel::data
