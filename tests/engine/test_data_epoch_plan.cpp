// EpochPlan: which rows each rank reads per batch, the padding it reports,
// and resuming at a list position.
#include <catch2/catch.hpp>
#include <map>
#include <vector>

#include "engine/data/epoch_plan.h"

namespace {

using accel::data::EpochPlan;
using accel::data::ShardLayout;

std::vector<int64_t> to_vector(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

ShardLayout layout(int64_t n, int64_t world, int64_t rank, int64_t batch, bool drop_last = false,
                   bool even_batches = true, bool shuffle = false) {
  ShardLayout l;
  l.dataset_size = n;
  l.world_size = world;
  l.rank = rank;
  l.batch_size = batch;
  l.drop_last = drop_last;
  l.even_batches = even_batches;
  l.shuffle = shuffle;
  l.seed = 5;
  return l;
}

}  // namespace

TEST_CASE("ranks read interleaved positions, padded from the start of the order", "[epoch_plan]") {
  // n = 5, W = 2, B = 2: the list 0 1 2 3 4 | 0; rank 0 reads 0 2 4, rank 1 reads 1 3 0.
  EpochPlan r0(layout(5, 2, 0, 2), 0), r1(layout(5, 2, 1, 2), 0);
  CHECK(to_vector(r0.indices()) == std::vector<int64_t>{0, 2, 4});
  CHECK(to_vector(r1.indices()) == std::vector<int64_t>{1, 3, 0});
  CHECK(r0.num_batches() == 2);
  CHECK(r1.num_batches() == 2);
  CHECK(r0.padding(0) == std::vector<int64_t>{0, 0});
  CHECK(r0.padding(1) == std::vector<int64_t>{0, 1});
  CHECK(r1.padding(1) == std::vector<int64_t>{0, 1});
}

TEST_CASE("even_batches = false reads no padding; drop_last whole batches only", "[epoch_plan]") {
  EpochPlan r0(layout(5, 2, 0, 2, false, false), 0), r1(layout(5, 2, 1, 2, false, false), 0);
  CHECK(to_vector(r0.indices()) == std::vector<int64_t>{0, 2, 4});
  CHECK(to_vector(r1.indices()) == std::vector<int64_t>{1, 3});
  CHECK(r1.num_batches() == 1);
  CHECK(r0.padding(1) == std::vector<int64_t>{0, 0});

  // n = 7, W = 2, B = 2: 3 per rank, one whole batch each.
  EpochPlan d0(layout(7, 2, 0, 2, true), 0), d1(layout(7, 2, 1, 2, true), 0);
  CHECK(to_vector(d0.indices()) == std::vector<int64_t>{0, 2});
  CHECK(to_vector(d1.indices()) == std::vector<int64_t>{1, 3});
  CHECK(d0.num_batches() == 1);
  CHECK(d0.padding(0) == std::vector<int64_t>{0, 0});
}

TEST_CASE("fewer samples than ranks: ranks past the data read padding", "[epoch_plan]") {
  EpochPlan plan(layout(1, 3, 2, 4), 0);
  CHECK(to_vector(plan.indices()) == std::vector<int64_t>{0});
  CHECK(plan.padding(0) == std::vector<int64_t>{0, 1, 1});
  CHECK(EpochPlan(layout(1, 3, 2, 4, false, false), 0).num_batches() == 0);
  CHECK(EpochPlan(layout(0, 2, 0, 4), 0).num_batches() == 0);
  CHECK(EpochPlan(layout(0, 2, 0, 4), 0).indices().numel() == 0);
}

TEST_CASE("the shuffled order is the DistributedSampler's for seed + epoch", "[epoch_plan]") {
  // PyTorch: randperm(10, generator seeded 0) = 4 1 7 5 3 9 0 8 6 2.
  ShardLayout l = layout(10, 1, 0, 3, false, true, true);
  l.seed = 0;
  CHECK(to_vector(EpochPlan(l, 0).indices()) == std::vector<int64_t>{4, 1, 7, 5, 3, 9, 0, 8, 6, 2});
  l.seed = -1;
  CHECK(to_vector(EpochPlan(l, 1).indices()) == std::vector<int64_t>{4, 1, 7, 5, 3, 9, 0, 8, 6, 2});
}

TEST_CASE("a plan started where another stopped continues it exactly", "[epoch_plan]") {
  for (bool drop_last : {false, true}) {
    for (bool even : {true, false}) {
      for (int64_t n = 1; n <= 13; ++n) {
        for (int64_t world = 1; world <= 3; ++world) {
          for (int64_t stop = 0; stop <= 3; ++stop) {
            CAPTURE(drop_last, even, n, world, stop);
            for (int64_t r = 0; r < world; ++r) {
              EpochPlan whole(layout(n, world, r, 2, drop_last, even, true), 2);
              if (stop > whole.num_batches()) continue;
              EpochPlan rest(whole.layout(), 2, whole.position_after(stop));
              const std::vector<int64_t> all = to_vector(whole.indices());
              const std::vector<int64_t> tail = to_vector(rest.indices());
              const size_t skipped = std::min(all.size(), static_cast<size_t>(stop * 2));
              CHECK(std::vector<int64_t>(all.begin() + static_cast<std::ptrdiff_t>(skipped), all.end()) == tail);
              CHECK(to_vector(whole.indices(stop)) == tail);
              CHECK(rest.num_batches() == whole.num_batches() - stop);
              for (int64_t k = stop; k < whole.num_batches(); ++k) CHECK(rest.padding(k - stop) == whole.padding(k));
            }
          }
        }
      }
    }
  }
}

TEST_CASE("resumed on another world size, every remaining sample is read once", "[epoch_plan]") {
  const int64_t n = 17;
  for (int64_t from = 1; from <= 3; ++from) {
    for (int64_t to = 1; to <= 3; ++to) {
      CAPTURE(from, to);
      std::map<int64_t, int> seen;
      const int64_t stop = 2;
      EpochPlan probe(layout(n, from, 0, 2, false, true, true), 0);
      for (int64_t r = 0; r < from; ++r) {
        const std::vector<int64_t> v = to_vector(EpochPlan(layout(n, from, r, 2, false, true, true), 0).indices());
        for (size_t i = 0; i < std::min<size_t>(v.size(), stop * 2); ++i) ++seen[v[i]];
      }
      const int64_t start = probe.position_after(stop);
      for (int64_t r = 0; r < to; ++r) {
        EpochPlan rest(layout(n, to, r, 2, false, true, true), 0, start);
        const std::vector<int64_t> v = to_vector(rest.indices());
        const int64_t padding = rest.num_batches() ? rest.padding(rest.num_batches() - 1)[r] : 0;
        for (size_t i = 0; i + static_cast<size_t>(padding) < v.size(); ++i) ++seen[v[i]];
      }
      REQUIRE(seen.size() == static_cast<size_t>(n));
      for (const auto& [index, count] : seen) CHECK(count == 1);
    }
  }
}

TEST_CASE("bad plan arguments are named", "[epoch_plan]") {
  CHECK_THROWS_WITH(EpochPlan(layout(10, 2, 2, 1), 0), Catch::Contains("rank 2"));
  CHECK_THROWS_WITH(EpochPlan(layout(10, 2, 0, 0), 0), Catch::Contains("batch_size"));
  CHECK_THROWS_WITH(EpochPlan(layout(10, 2, 0, 1), 0, 11), Catch::Contains("start 11"));
}
