// shuffled_order against PyTorch 1.13's randperm, as its DistributedSampler
// draws it. Expected values were printed by /usr/bin/python3 (python3-torch
// 1.13.1) with:
//
//   import torch
//   def perm(n, seed, epoch):
//       g = torch.Generator(); g.manual_seed(seed + epoch)
//       return torch.randperm(n, generator=g).tolist()
#include <catch2/catch.hpp>
#include <vector>

#include "engine/data/shuffled_order.h"

namespace {

std::vector<int64_t> to_vector(const at::Tensor& t) {
  REQUIRE(t.scalar_type() == at::kLong);
  REQUIRE(t.dim() == 1);
  at::Tensor c = t.contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

std::vector<int64_t> permutation(int64_t n, int64_t seed, int64_t epoch) {
  return to_vector(accel::data::shuffled_order(n, seed, epoch));
}

}  // namespace

TEST_CASE("shuffled order is PyTorch's randperm for seed + epoch", "[sampler]") {
  // perm(10, 0, 0), perm(13, 42, 3), perm(7, 1234, 1), perm(100, -5, 2)
  CHECK(permutation(10, 0, 0) == std::vector<int64_t>{4, 1, 7, 5, 3, 9, 0, 8, 6, 2});
  CHECK(permutation(13, 42, 3) == std::vector<int64_t>{7, 3, 2, 11, 10, 12, 0, 8, 1, 9, 4, 6, 5});
  CHECK(permutation(7, 1234, 1) == std::vector<int64_t>{6, 5, 4, 0, 3, 2, 1});
  CHECK(permutation(100, -5, 2) ==
        std::vector<int64_t>{51, 54, 3,  33, 95, 75, 42, 31, 36, 57, 88, 93, 61, 72, 47, 94, 5,
                             73, 16, 52, 55, 48, 13, 26, 20, 80, 70, 4,  74, 15, 50, 1,  24, 99,
                             17, 91, 97, 49, 59, 69, 30, 60, 29, 78, 44, 0,  9,  37, 62, 84, 12,
                             83, 79, 66, 39, 22, 53, 6,  89, 87, 27, 92, 96, 21, 10, 68, 11, 45,
                             32, 25, 65, 38, 43, 35, 14, 7,  8,  90, 56, 98, 67, 28, 86, 2,  23,
                             58, 34, 76, 63, 19, 81, 46, 64, 71, 85, 82, 77, 41, 18, 40});
}

TEST_CASE("a large shuffled order matches PyTorch's", "[sampler]") {
  // g = torch.Generator(); g.manual_seed(3 + 1); p = torch.randperm(50000, generator=g)
  // p[:6].tolist(), p[-3:].tolist(), int((p * torch.arange(50000)).sum())
  at::Tensor p = accel::data::shuffled_order(50000, 3, 1);
  const std::vector<int64_t> v = to_vector(p);
  CHECK(std::vector<int64_t>(v.begin(), v.begin() + 6) ==
        std::vector<int64_t>{11530, 17059, 38649, 15281, 31729, 31501});
  CHECK(std::vector<int64_t>(v.end() - 3, v.end()) == std::vector<int64_t>{11789, 42704, 9007});
  CHECK((p * at::arange(50000, at::kLong)).sum().item<int64_t>() == 31305502397869);
}

TEST_CASE("epochs reshuffle and the same epoch repeats", "[sampler]") {
  const at::Tensor first = accel::data::shuffled_order(50, 9, 4);
  CHECK(accel::data::shuffled_order(50, 9, 4).equal(first));
  CHECK_FALSE(accel::data::shuffled_order(50, 9, 5).equal(first));
  CHECK(accel::data::shuffled_order(0, 9).numel() == 0);
}
