#include "engine/data/shuffled_order.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

namespace accel::data {

at::Tensor shuffled_order(int64_t n, int64_t seed, int64_t epoch) {
  TORCH_CHECK(n >= 0, "shuffled_order: the data set size must be >= 0, got ", n);
  const auto generator_seed = static_cast<uint64_t>(seed) + static_cast<uint64_t>(epoch);
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(generator_seed);
  return at::randperm(n, generator, at::kLong);
}

}  // namespace accel::data
