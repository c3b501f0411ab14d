// DistributedSampler against PyTorch 1.13's torch.utils.data.DistributedSampler.
// Expected values were printed by /usr/bin/python3 (python3-torch 1.13.1) with:
//
//   import torch
//   from torch.utils.data import DistributedSampler
//   def perm(n, seed, epoch):
//       g = torch.Generator(); g.manual_seed(seed + epoch)
//       return torch.randperm(n, generator=g).tolist()
//   def shards(n, W, seed, epoch, shuffle, drop_last):
//       out = []
//       for r in range(W):
//           s = DistributedSampler(range(n), num_replicas=W, rank=r, shuffle=shuffle,
//                                  seed=seed, drop_last=drop_last)
//           s.set_epoch(epoch)
//           out.append(list(s))
//       return out
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <vector>

#include "engine/distributed_sampler.h"

namespace {

std::vector<int64_t> to_vector(const at::Tensor& t) {
  REQUIRE(t.scalar_type() == at::kLong);
  REQUIRE(t.dim() == 1);
  at::Tensor c = t.contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

// With one rank, no padding and no truncation, the shard is the whole permutation.
std::vector<int64_t> permutation(int64_t n, int64_t seed, int64_t epoch) {
  accel::DistributedSampler sampler(n, 1, 0, /*shuffle=*/true, seed);
  sampler.set_epoch(epoch);
  return to_vector(sampler.shard().indices);
}

std::vector<std::vector<int64_t>> shards(int64_t n, int64_t world, int64_t seed, int64_t epoch,
                                         bool shuffle, bool drop_last) {
  std::vector<std::vector<int64_t>> out;
  for (int64_t r = 0; r < world; ++r) {
    accel::DistributedSampler sampler(n, world, r, shuffle, seed, drop_last);
    sampler.set_epoch(epoch);
    out.push_back(to_vector(sampler.shard().indices));
  }
  return out;
}

using Shards = std::vector<std::vector<int64_t>>;

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
  accel::DistributedSampler sampler(50000, 1, 0, true, 3);
  sampler.set_epoch(1);
  at::Tensor p = sampler.shard().indices;
  const std::vector<int64_t> v = to_vector(p);
  CHECK(std::vector<int64_t>(v.begin(), v.begin() + 6) ==
        std::vector<int64_t>{11530, 17059, 38649, 15281, 31729, 31501});
  CHECK(std::vector<int64_t>(v.end() - 3, v.end()) == std::vector<int64_t>{11789, 42704, 9007});
  CHECK((p * at::arange(50000, at::kLong)).sum().item<int64_t>() == 31305502397869);
}

TEST_CASE("shards match PyTorch's DistributedSampler", "[sampler]") {
  // shards(10, 3, 5, 2, True, False)
  CHECK(shards(10, 3, 5, 2, true, false) == Shards{{5, 4, 9, 2}, {0, 1, 6, 5}, {3, 7, 8, 0}});
  // shards(10, 3, 5, 2, True, True)
  CHECK(shards(10, 3, 5, 2, true, true) == Shards{{5, 4, 9}, {0, 1, 6}, {3, 7, 8}});
  // shards(2, 3, 7, 0, True, False): fewer samples than ranks, padding wraps around
  CHECK(shards(2, 3, 7, 0, true, false) == Shards{{1}, {0}, {1}});
  // shards(5, 4, 0, 0, False, False)
  CHECK(shards(5, 4, 0, 0, false, false) == Shards{{0, 4}, {1, 0}, {2, 1}, {3, 2}});
}

TEST_CASE("epochs reshuffle and the same epoch repeats", "[sampler]") {
  accel::DistributedSampler sampler(50, 2, 1, true, 9);
  sampler.set_epoch(4);
  const at::Tensor first = sampler.shard().indices;
  CHECK(sampler.shard().indices.equal(first));
  sampler.set_epoch(5);
  CHECK_FALSE(sampler.shard().indices.equal(first));
  CHECK(sampler.epoch() == 5);
}

TEST_CASE("ranks partition the data set; padding is counted exactly", "[sampler]") {
  for (bool shuffle : {false, true}) {
    for (int64_t n = 1; n <= 13; ++n) {
      for (int64_t world = 1; world <= 3; ++world) {
        CAPTURE(shuffle, n, world);
        std::map<int64_t, int64_t> seen;
        int64_t padding = 0;
        int64_t total = 0;
        for (int64_t r = 0; r < world; ++r) {
          accel::DistributedSampler sampler(n, world, r, shuffle, 17);
          sampler.set_epoch(3);
          const accel::RankShard shard = sampler.shard();
          const std::vector<int64_t> v = to_vector(shard.indices);
          REQUIRE(static_cast<int64_t>(v.size()) == sampler.num_samples());
          CHECK(shard.total_size == world * sampler.num_samples());
          CHECK(shard.num_padding >= 0);
          CHECK(shard.num_padding <= 1);
          // The real samples come first; dropping the last num_padding of every
          // rank leaves each index exactly once.
          for (std::size_t k = 0; k + shard.num_padding < v.size(); ++k) ++seen[v[k]];
          padding += shard.num_padding;
          total += static_cast<int64_t>(v.size());
        }
        CHECK(total == (n + world - 1) / world * world);
        CHECK(padding == total - n);
        REQUIRE(static_cast<int64_t>(seen.size()) == n);
        for (const auto& [index, count] : seen) {
          CHECK(index >= 0);
          CHECK(index < n);
          CHECK(count == 1);
        }
      }
    }
  }
}

TEST_CASE("drop_last truncates to a multiple of the world size", "[sampler]") {
  for (int64_t n = 1; n <= 13; ++n) {
    for (int64_t world = 1; world <= 3; ++world) {
      CAPTURE(n, world);
      std::map<int64_t, int64_t> seen;
      for (int64_t r = 0; r < world; ++r) {
        accel::DistributedSampler sampler(n, world, r, true, 0, /*drop_last=*/true);
        const accel::RankShard shard = sampler.shard();
        CHECK(sampler.num_samples() == n / world);
        CHECK(shard.num_padding == 0);
        CHECK(shard.total_size == n / world * world);
        for (int64_t i : to_vector(shard.indices)) ++seen[i];
      }
      CHECK(static_cast<int64_t>(seen.size()) == n / world * world);
      for (const auto& [index, count] : seen) CHECK(count == 1);
    }
  }
}

TEST_CASE("an empty data set gives empty shards", "[sampler]") {
  for (bool drop_last : {false, true}) {
    accel::DistributedSampler sampler(0, 2, 1, true, 0, drop_last);
    const accel::RankShard shard = sampler.shard();
    CHECK(shard.indices.numel() == 0);
    CHECK(shard.num_padding == 0);
    CHECK(shard.total_size == 0);
  }
}

TEST_CASE("bad sampler arguments are named", "[sampler]") {
  CHECK_THROWS_WITH(accel::DistributedSampler(10, 2, 2), Catch::Contains("rank 2"));
  CHECK_THROWS_WITH(accel::DistributedSampler(10, 0, 0), Catch::Contains("world_size"));
  CHECK_THROWS_WITH(accel::DistributedSampler(-1, 1, 0), Catch::Contains("dataset_size"));
}

TEST_CASE("R ranks at batch B read the batches of 1 rank at batch R*B", "[sampler]") {
  const int64_t n = 24, world = 3, batch = 2;
  accel::DistributedSampler single(n, 1, 0, true, 11);
  const std::vector<int64_t> one = to_vector(single.shard().indices);
  std::vector<std::vector<int64_t>> ranks;
  for (int64_t r = 0; r < world; ++r)
    ranks.push_back(to_vector(accel::DistributedSampler(n, world, r, true, 11).shard().indices));
  for (int64_t k = 0; k < n / (world * batch); ++k) {
    CAPTURE(k);
    std::vector<int64_t> global;
    for (const auto& shard : ranks)
      global.insert(global.end(), shard.begin() + k * batch, shard.begin() + (k + 1) * batch);
    std::vector<int64_t> expected(one.begin() + k * world * batch,
                                  one.begin() + (k + 1) * world * batch);
    std::sort(global.begin(), global.end());
    std::sort(expected.begin(), expected.end());
    CHECK(global == expected);
  }
}
