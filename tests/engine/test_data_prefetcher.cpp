// BatchPrefetcher: batches in order whatever thread gathered them, equal to
// gathering on the caller's thread; errors at the batch that failed; and
// closing with batches still queued; idle workers ending and coming back.
#include <catch2/catch.hpp>

#include <filesystem>
#include <thread>

#include "engine/data/batch_prefetcher.h"

using accel::data::BatchPrefetcher;
using accel::data::take_rows;

namespace {

int64_t threads_of_this_process() {
  int64_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    (void)entry;
    ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("prefetched batches equal gathering in order", "[prefetcher]") {
  const at::Tensor x = at::randn({257, 3}), y = at::arange(257, at::kLong);
  const at::Tensor rows = at::randperm(257, at::kLong);
  for (int64_t workers : {1, 2, 5}) {
    for (int64_t batch : {1, 7, 300}) {
      CAPTURE(workers, batch);
      BatchPrefetcher prefetcher({x, y}, rows, batch, workers, 2 * workers);
      CHECK(prefetcher.num_batches() == (257 + batch - 1) / batch);
      std::vector<at::Tensor> got;
      int64_t k = 0;
      while (prefetcher.next(got)) {
        const int64_t first = k * batch, size = std::min<int64_t>(batch, 257 - first);
        const std::vector<at::Tensor> expected = take_rows({x, y}, rows.narrow(0, first, size));
        REQUIRE(got.size() == 2);
        CHECK(got[0].equal(expected[0]));
        CHECK(got[1].equal(expected[1]));
        ++k;
      }
      CHECK(k == prefetcher.num_batches());
      CHECK_FALSE(prefetcher.next(got));
    }
  }
}

TEST_CASE("a failing batch raises when it is taken, after the good ones", "[prefetcher]") {
  // y has 10 rows, so only the batch holding row 12 fails.
  const at::Tensor x = at::arange(20, at::kLong), y = at::arange(10, at::kLong);
  const at::Tensor rows = at::tensor(std::vector<int64_t>{0, 1, 2, 3, 12, 5}, at::kLong);
  BatchPrefetcher prefetcher({x, y}, rows, 2, 3, 6);
  std::vector<at::Tensor> got;
  CHECK(prefetcher.next(got));
  CHECK(prefetcher.next(got));
  CHECK_THROWS_WITH(prefetcher.next(got), Catch::Contains("out of range"));
}

TEST_CASE("closing with batches queued stops the workers", "[prefetcher]") {
  const at::Tensor x = at::arange(1000, at::kLong);
  BatchPrefetcher prefetcher({x}, at::arange(1000, at::kLong), 1, 4, 2);
  std::vector<at::Tensor> got;
  CHECK(prefetcher.next(got));
  prefetcher.close();
  CHECK_THROWS_WITH(prefetcher.next(got), Catch::Contains("after close"));
}

TEST_CASE("prefetchers left in the middle hold no threads, and resume where they were", "[prefetcher]") {
  // A loop that ends with break leaves its loader's prefetcher waiting for
  // room: 200 such loaders held 400 threads.
  const at::Tensor x = at::randn({100, 2});
  const at::Tensor rows = at::randperm(100, at::kLong);
  const int64_t before = threads_of_this_process();
  std::vector<std::unique_ptr<BatchPrefetcher>> left;
  std::vector<at::Tensor> got;
  for (int i = 0; i < 20; ++i) {
    left.push_back(std::make_unique<BatchPrefetcher>(std::vector<at::Tensor>{x}, rows, 10, 2, 4,
                                                     std::chrono::milliseconds(50)));
    REQUIRE(left.back()->next(got));
  }
  // Each worker ends 50 ms after it finds the queue full.
  int64_t after = 0;
  for (int tries = 0; tries < 200 && (after = threads_of_this_process()) > before; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(after <= before);
  // A prefetcher taken up again starts workers and gives the rest in order.
  BatchPrefetcher& p = *left.front();
  int64_t k = 1;
  while (p.next(got)) {
    const std::vector<at::Tensor> expected = take_rows({x}, rows.narrow(0, k * 10, 10));
    CHECK(got[0].equal(expected[0]));
    ++k;
  }
  CHECK(k == 10);
}
