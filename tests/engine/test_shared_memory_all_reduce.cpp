// The shared memory all-reduce between real processes: values against
// closed forms over several chunks, every reduce op and dtype it takes, and
// the failures a waiting rank must report instead of hanging.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "engine/comm/shared_memory_all_reduce.h"
#include "tests/engine/forked_ranks.h"

namespace {

using accel::ReduceOp;
using accel::SharedMemoryAllReduce;
using namespace std::chrono_literals;

uint64_t fresh_token() { return (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}(); }

std::string segment_path(uint64_t token) {
  char name[64];
  std::snprintf(name, sizeof name, "/dev/shm/accel-all-reduce-%016llx", static_cast<unsigned long long>(token));
  return name;
}

// Rank 0 creates the segment; the others open it once it exists. The name is
// removed as soon as every rank holds it, as the Gloo communicator does after
// its join.
std::unique_ptr<SharedMemoryAllReduce> join(int rank, int size, uint64_t token,
                                            std::chrono::milliseconds timeout = 30s) {
  SharedMemoryAllReduce::Options options;
  options.timeout = timeout;
  options.spin = false;  // the ranks of a test share the machine with other tests
  if (rank == 0) return SharedMemoryAllReduce::create(size, token, options);
  for (auto deadline = std::chrono::steady_clock::now() + 10s;; std::this_thread::sleep_for(1ms)) {
    try {
      return SharedMemoryAllReduce::open(rank, size, token, options);
    } catch (const std::runtime_error&) {
      if (std::chrono::steady_clock::now() > deadline) throw;
    }
  }
}

// The message of the CollectiveError an all-reduce of 4 floats fails with;
// "" when it succeeds.
std::string failure_of(SharedMemoryAllReduce& reducer) {
  at::Tensor t = at::ones({4});
  try {
    reducer.all_reduce(t, ReduceOp::Sum);
  } catch (const accel::CollectiveError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("three ranks all-reduce through shared memory like a sum over ranks") {
  const uint64_t token = fresh_token();
  auto codes = accel::testing::run_forked(3, [token](int rank) {
    auto reducer = join(rank, 3, token);
    // 1.5M floats (6 MB): several chunks, the last one partial.
    const int64_t n = 1500000;
    at::Tensor big = at::arange(n, at::kFloat).fmod(1000) + rank;
    reducer->all_reduce(big, ReduceOp::Sum);
    CHILD_CHECK(big.equal(at::arange(n, at::kFloat).fmod(1000) * 3 + 3));

    at::Tensor mean = at::full({5}, rank * 3.0, at::kDouble);
    reducer->all_reduce(mean, ReduceOp::Average);
    CHILD_CHECK(mean.equal(at::full({5}, 3.0, at::kDouble)));

    at::Tensor biggest = at::tensor({rank, -rank, 7}, at::kLong);
    reducer->all_reduce(biggest, ReduceOp::Max);
    CHILD_CHECK(biggest.equal(at::tensor({2, 0, 7}, at::kLong)));

    at::Tensor smallest = at::tensor({rank, -rank}, at::kInt);
    reducer->all_reduce(smallest, ReduceOp::Min);
    CHILD_CHECK(smallest.equal(at::tensor({0, -2}, at::kInt)));

    at::Tensor half = at::full({9}, 0.5, at::kBFloat16) * (rank + 1);
    reducer->all_reduce(half, ReduceOp::Sum);
    CHILD_CHECK(half.equal(at::full({9}, 3.0, at::kBFloat16)));

    // A transposed view is reduced in place, through a contiguous copy.
    at::Tensor base = at::arange(6, at::kFloat).view({2, 3}) * (rank + 1);
    at::Tensor view = base.t();
    reducer->all_reduce(view, ReduceOp::Sum);
    CHILD_CHECK(base.equal(at::arange(6, at::kFloat).view({2, 3}) * 6));

    at::Tensor empty = at::empty({0});
    reducer->all_reduce(empty, ReduceOp::Sum);
    CHILD_CHECK(empty.numel() == 0);

    // Fewer elements than ranks: one rank reduces nothing, all still meet.
    at::Tensor one = at::full({1}, rank + 1.0);
    reducer->all_reduce(one, ReduceOp::Sum);
    CHILD_CHECK(one.item<double>() == 6.0);
  });
  REQUIRE(codes == std::vector<int>{0, 0, 0});
  REQUIRE_FALSE(std::filesystem::exists(segment_path(token)));
}

TEST_CASE("three ranks reduce-scatter and all-gather through shared memory, between all-reduces") {
  const uint64_t token = fresh_token();
  auto codes = accel::testing::run_forked(3, [token](int rank) {
    auto reducer = join(rank, 3, token);
    // Rank q's element i: (i mod 1000) + q, exact in float32.
    auto values = [](int q, int64_t numel) { return at::arange(numel, at::kFloat).fmod(1000) + q; };

    // Shards of 700001 floats: a reduce-scatter chunk holds about 116500 of
    // each shard with 3 ranks, an all-gather chunk about 350000 of each input.
    const int64_t n = 700001;
    at::Tensor shard = at::empty({n});
    reducer->reduce_scatter(shard, values(rank, 3 * n), ReduceOp::Sum);
    CHILD_CHECK(shard.equal((at::arange(rank * n, (rank + 1) * n, at::kFloat).fmod(1000)) * 3 + 3));

    at::Tensor gathered = at::full({3 * n}, -1.0f);
    reducer->all_gather(gathered, values(rank, n));
    for (int q = 0; q < 3; ++q) CHILD_CHECK(gathered.narrow(0, q * n, n).equal(values(q, n)));

    // In place: the input is this rank's slice of the output.
    at::Tensor flat = at::zeros({3 * n}, at::kDouble);
    at::Tensor mine = flat.narrow(0, rank * n, n);
    mine.copy_(values(rank, n));
    reducer->all_gather(flat, mine);
    for (int q = 0; q < 3; ++q) CHILD_CHECK(flat.narrow(0, q * n, n).equal(values(q, n).to(at::kDouble)));

    // Every op, and shards smaller than the ranks' count of elements.
    at::Tensor biggest = at::empty({2}, at::kLong);
    reducer->reduce_scatter(biggest, at::tensor({rank, -rank, 7 - rank, rank * rank, 0, -1}, at::kLong),
                            ReduceOp::Max);
    const std::vector<int64_t> maxima[] = {{2, 0}, {7, 4}, {0, -1}};
    CHILD_CHECK(biggest.equal(at::tensor(maxima[rank], at::kLong)));
    at::Tensor mean = at::empty({1}, at::kBFloat16);
    reducer->reduce_scatter(mean, at::full({3}, 3.0 * rank, at::kBFloat16), ReduceOp::Average);
    CHILD_CHECK(mean.item<float>() == 3.0f);
    at::Tensor none = at::empty({0});
    reducer->reduce_scatter(none, at::empty({0}), ReduceOp::Min);
    reducer->all_gather(none, at::empty({0}));

    // One-meeting and two-meeting chunks mixed, of sizes every rank draws
    // alike: a rank that wrote a set before the others had read it would
    // corrupt some value here.
    std::mt19937 draw(7);
    for (int round = 0; round < 60; ++round) {
      const int64_t m = std::uniform_int_distribution<int64_t>(1, 300000)(draw);
      at::Tensor sum = values(rank, m);
      reducer->all_reduce(sum, ReduceOp::Sum);
      CHILD_CHECK(sum.equal(at::arange(m, at::kFloat).fmod(1000) * 3 + 3));
      at::Tensor part = at::empty({m});
      reducer->reduce_scatter(part, values(rank, 3 * m), ReduceOp::Sum);
      CHILD_CHECK(part.equal(at::arange(rank * m, (rank + 1) * m, at::kFloat).fmod(1000) * 3 + 3));
      at::Tensor all = at::empty({3 * m});
      reducer->all_gather(all, values(rank, m));
      for (int q = 0; q < 3; ++q) CHILD_CHECK(all.narrow(0, q * m, m).equal(values(q, m)));
    }
  });
  REQUIRE(codes == std::vector<int>{0, 0, 0});
}

TEST_CASE("a rank that exits fails its peer's reduce-scatter, which names it and the collective") {
  const uint64_t token = fresh_token();
  auto codes = accel::testing::run_forked(2, [token](int rank) {
    auto reducer = join(rank, 2, token);
    if (rank == 1) std::_Exit(3);
    at::Tensor output = at::empty({4});
    std::string failure;
    try {
      reducer->reduce_scatter(output, at::ones({8}), ReduceOp::Sum);
    } catch (const accel::CollectiveError& e) {
      failure = e.what();
    }
    CHILD_CHECK(contains(failure, "reduce_scatter over shared memory: rank 1 (pid "));
    at::Tensor gathered = at::empty({8});
    try {
      reducer->all_gather(gathered, output);
    } catch (const accel::CollectiveError& e) {
      failure = e.what();
    }
    CHILD_CHECK(contains(failure, "all_gather_into over shared memory: an earlier collective failed"));
  });
  REQUIRE(codes == std::vector<int>{0, 3});
}

TEST_CASE("the segment's name lives until unlink_name") {
  const uint64_t token = fresh_token();
  auto reducer = SharedMemoryAllReduce::create(2, token, {});
  REQUIRE(std::filesystem::exists(segment_path(token)));
  REQUIRE_THROWS_WITH(SharedMemoryAllReduce::create(2, token, {}), Catch::Contains("cannot create"));
  reducer->unlink_name();
  REQUIRE_FALSE(std::filesystem::exists(segment_path(token)));
  REQUIRE_THROWS_WITH(SharedMemoryAllReduce::open(1, 2, token, {}), Catch::Contains("cannot open"));
}

TEST_CASE("only CPU tensors of numeric types take shared memory") {
  REQUIRE(SharedMemoryAllReduce::supports(at::ones({2})));
  REQUIRE(SharedMemoryAllReduce::supports(at::ones({2}, at::kHalf)));
  REQUIRE_FALSE(SharedMemoryAllReduce::supports(at::ones({2}, at::kBool)));
  REQUIRE_FALSE(SharedMemoryAllReduce::supports(at::ones({2}, at::kComplexFloat)));
}

TEST_CASE("a rank that exits fails its peer's all-reduce, which names it") {
  const uint64_t token = fresh_token();
  auto codes = accel::testing::run_forked(2, [token](int rank) {
    auto reducer = join(rank, 2, token);
    if (rank == 1) std::_Exit(3);  // never arrives; its parent has not reaped it yet
    const auto start = std::chrono::steady_clock::now();
    const std::string failure = failure_of(*reducer);
    CHILD_CHECK(contains(failure, "rank 1 (pid ") && contains(failure, ") exited"));
    CHILD_CHECK(std::chrono::steady_clock::now() - start < 5s);
    // Out of step for good: a second call fails at once.
    CHILD_CHECK(contains(failure_of(*reducer), "an earlier collective failed"));
  });
  REQUIRE(codes == std::vector<int>{0, 3});
}

TEST_CASE("a rank that does not arrive fails its peer's all-reduce at the timeout") {
  const uint64_t token = fresh_token();
  auto codes = accel::testing::run_forked(2, [token](int rank) {
    auto reducer = join(rank, 2, token, 300ms);
    if (rank == 1) {
      std::this_thread::sleep_for(3s);
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    CHILD_CHECK(contains(failure_of(*reducer), "rank 1 did not arrive within 0.3 s"));
    const auto waited = std::chrono::steady_clock::now() - start;
    CHILD_CHECK(waited >= 300ms && waited < 2s);
  });
  REQUIRE(codes == std::vector<int>{0, 0});
}
