// The communicator's collectives between real processes over Gloo, joined
// through the launcher's store, and gradient averaging on top of them.
#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/comm/device_routed_communicator.h"
#include "engine/comm/single_process_communicator.h"
#include "engine/parallel/gradient_reducer.h"
#include "engine/process_state.h"
#include "engine/launch/store_server.h"
#include "tests/engine/joined_ranks.h"

using accel::testing::join;
using accel::testing::kToken;
using accel::testing::run_ranks;

TEST_CASE("collectives between two processes over Gloo") {
  // All-reduces take shared memory when every rank is local, TCP otherwise.
  const bool shared_memory = GENERATE(true, false);
  CAPTURE(shared_memory);
  auto codes = run_ranks(2, [shared_memory](int rank, accel::Communicator& comm) {
    CHILD_CHECK(comm.rank() == rank && comm.size() == 2 && comm.backend() == "gloo");

    at::Tensor sum = at::full({3}, rank + 1.0);
    comm.all_reduce(sum, accel::ReduceOp::Sum);
    CHILD_CHECK(sum.equal(at::full({3}, 3.0)));

    at::Tensor mean = at::full({2, 2}, rank * 4.0);
    comm.all_reduce(mean, accel::ReduceOp::Average);
    CHILD_CHECK(mean.equal(at::full({2, 2}, 2.0)));

    at::Tensor biggest = at::tensor({rank == 0 ? 5.0 : 1.0, rank == 0 ? -1.0 : 7.0});
    comm.all_reduce(biggest, accel::ReduceOp::Max);
    CHILD_CHECK(biggest.equal(at::tensor({5.0, 7.0})));

    at::Tensor async = at::full({4}, 1.0);
    auto pending = comm.all_reduce_async(async, accel::ReduceOp::Sum);
    pending->wait();
    CHILD_CHECK(async.equal(at::full({4}, 2.0)));

    at::Tensor root = rank == 1 ? at::arange(5.0) : at::zeros({5});
    comm.broadcast(root, 1);
    CHILD_CHECK(root.equal(at::arange(5.0)));

    auto parts = comm.all_gather(at::full({2}, static_cast<double>(rank)));
    CHILD_CHECK(parts.size() == 2 && parts[0].equal(at::zeros({2})) && parts[1].equal(at::ones({2})));

    auto flags = comm.all_gather(at::full({1}, rank == 1, at::kBool));
    CHILD_CHECK(flags[0].item<bool>() == false && flags[1].item<bool>() == true);

    comm.barrier();
    CHILD_CHECK(comm.counts().all_reduce == 4 && comm.counts().broadcast == 1 &&
                comm.counts().all_gather == 2 && comm.counts().barrier == 1);
    CHILD_CHECK(comm.counts().all_reduce_shared_memory == (shared_memory ? 4 : 0));
  }, shared_memory);
  REQUIRE(codes == std::vector<int>{0, 0});
}

TEST_CASE("reduce_scatter and all_gather_into between three processes over Gloo") {
  // Through shared memory when every rank is local, else Gloo's all-reduce
  // (reduce_scatter) and list all-gather over TCP.
  const bool shared_memory = GENERATE(true, false);
  CAPTURE(shared_memory);
  auto codes = run_ranks(3, [](int rank, accel::Communicator& comm) {
    // Rank q's element i: (i mod 50) + q, whose sums bfloat16 holds exactly.
    auto values = [](int q, int64_t numel, at::ScalarType type) {
      return (at::arange(numel, at::kLong).remainder(50) + q).to(type);
    };
    auto sums = [](int r, int64_t n, at::ScalarType type) {
      return (at::arange(r * n, (r + 1) * n, at::kLong).remainder(50) * 3 + 3).to(type);
    };
    const accel::CollectiveCounts before = comm.counts();
    for (at::ScalarType type : {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf, at::kLong}) {
      for (int64_t n : {1, 13, 500001}) {
        at::Tensor shard = at::empty({n}, type);
        at::Tensor input = values(rank, 3 * n, type);
        comm.reduce_scatter(shard, input, accel::ReduceOp::Sum);
        CHILD_CHECK(shard.equal(sums(rank, n, type)));

        at::Tensor gathered = at::empty({3 * n}, type);
        comm.all_gather_into(gathered, values(rank, n, type));
        for (int q = 0; q < 3; ++q) CHILD_CHECK(gathered.narrow(0, q * n, n).equal(values(q, n, type)));
      }
    }

    at::Tensor mean = at::empty({2});
    at::Tensor scratch = at::full({6}, 3.0 * rank);
    comm.reduce_scatter(mean, scratch, accel::ReduceOp::Average);
    CHILD_CHECK(mean.equal(at::full({2}, 3.0f)));

    // In place and asynchronously; bool takes Gloo's path as bytes.
    at::Tensor flat = at::zeros({30});
    at::Tensor mine = flat.narrow(0, rank * 10, 10);
    mine.fill_(rank + 1);
    auto pending = comm.all_gather_into_async(flat, mine);
    pending->wait();
    CHILD_CHECK(flat.equal(at::repeat_interleave(at::arange(1, 4, at::kFloat), 10)));
    at::Tensor flags = at::empty({3}, at::kBool);
    comm.all_gather_into(flags, at::full({1}, rank == 1, at::kBool));
    CHILD_CHECK(flags.to(at::kLong).equal(at::tensor({0, 1, 0}, at::kLong)));

    // bfloat16 all-reduces too, which Gloo takes as float32.
    at::Tensor half_sum = at::full({5}, rank + 0.5, at::kBFloat16);
    comm.all_reduce(half_sum, accel::ReduceOp::Sum);
    CHILD_CHECK(half_sum.equal(at::full({5}, 4.5, at::kBFloat16)));

    const accel::CollectiveCounts done = comm.counts() - before;
    CHILD_CHECK(done.reduce_scatter == 16 && done.all_gather == 17 && done.all_reduce == 1);

    // Wrong sizes fail before anything is sent, naming the collective.
    at::Tensor small = at::empty({4});
    try {
      comm.reduce_scatter(small, scratch, accel::ReduceOp::Sum);
      CHILD_CHECK(false);
    } catch (const c10::Error& e) {
      CHILD_CHECK(std::string(e.what()).find("reduce_scatter: input has 6 elements, expected 3 ranks x 4") !=
                  std::string::npos);
    }
    CHILD_CHECK(comm.counts().reduce_scatter == before.reduce_scatter + 16);
  }, shared_memory);
  REQUIRE(codes == std::vector<int>{0, 0, 0});
}

TEST_CASE("a device-routed communicator gives host tensors to its host side") {
  // On a GPU run the device side is NCCL; here a one-rank communicator
  // stands there, so a host tensor reduced across both ranks proves where
  // it went, and the device side must not have been asked.
  accel::StoreServer store("127.0.0.1", 0, kToken);
  auto codes = accel::testing::run_forked(2, [&](int rank) {
    accel::DeviceRoutedCommunicator routed(join(rank, 2, store), std::make_unique<accel::SingleProcessCommunicator>());
    CHILD_CHECK(routed.rank() == rank && routed.size() == 2 && routed.backend() == "none");
    at::Tensor sum = at::full({3}, rank + 1.0);
    routed.all_reduce(sum, accel::ReduceOp::Sum);
    CHILD_CHECK(sum.equal(at::full({3}, 3.0)));
    auto parts = routed.all_gather(at::full({1}, static_cast<double>(rank)));
    CHILD_CHECK(parts.size() == 2 && parts[1].item<double>() == 1.0);
    at::Tensor shard = at::empty({1});
    at::Tensor input = at::full({2}, rank + 1.0);
    routed.reduce_scatter(shard, input, accel::ReduceOp::Sum);
    CHILD_CHECK(shard.item<double>() == 3.0);
    at::Tensor gathered = at::empty({2});
    routed.all_gather_into_async(gathered, at::full({1}, rank + 1.0))->wait();
    CHILD_CHECK(gathered.equal(at::tensor({1.0f, 2.0f})));
    routed.barrier();
    CHILD_CHECK(routed.counts().all_reduce == 1 && routed.counts().all_gather == 2 &&
                routed.counts().barrier == 1 && routed.counts().reduce_scatter == 1);
  });
  REQUIRE(codes == std::vector<int>{0, 0});
}

TEST_CASE("the reducer averages gradients during backward; unused parameters stay gradient-free") {
  auto codes = run_ranks(2, [](int rank, accel::Communicator& comm) {
    // Four parameters of 4 floats (16 bytes); 32-byte buckets hold two.
    std::vector<at::Tensor> params;
    for (int i = 0; i < 4; ++i) params.push_back(at::zeros({4}).requires_grad_());
    accel::GradientReducer reducer(comm, params, 32);
    CHILD_CHECK(reducer.num_buckets() == 2);

    // Parameter 2 is used on rank 1 only, parameter 3 on no rank.
    at::Tensor loss = (params[0] * (rank == 0 ? 1.0 : 3.0)).sum() + (params[1] * rank).sum();
    if (rank == 1) loss = loss + (params[2] * 8.0).sum();
    int64_t before = comm.counts().all_reduce;
    reducer.caller_finishes_backward();
    loss.backward();
    reducer.end_backward();
    reducer.finalize();
    CHILD_CHECK(comm.counts().all_reduce - before == 2);  // one per bucket
    CHILD_CHECK(params[0].grad().equal(at::full({4}, 2.0)));
    CHILD_CHECK(params[1].grad().equal(at::full({4}, 0.5)));
    CHILD_CHECK(params[2].grad().equal(at::full({4}, 4.0)));
    CHILD_CHECK(!params[3].grad().defined());

    // Events are recorded: the gradients that arrived, then the buckets
    // (bucket 1 waits for bucket 0, whose parameter 3 never gets a gradient).
    auto events = reducer.last_events();
    CHILD_CHECK(events.size() == (rank == 0 ? 4u : 5u));  // used gradients plus two buckets
    using Kind = accel::GradientReducer::Event::Kind;
    CHILD_CHECK(events.front().kind == Kind::GradientReady);

    // A non-synchronising backward only accumulates locally.
    reducer.set_sync(false);
    before = comm.counts().all_reduce;
    (params[0] * 1.0).sum().backward();
    reducer.finalize();
    CHILD_CHECK(comm.counts().all_reduce == before);
    CHILD_CHECK(params[0].grad().equal(at::full({4}, 3.0)));
  });
  REQUIRE(codes == std::vector<int>{0, 0});
}

// A backward nobody announced (a recipe's plain loss:backward()) is ended by
// the reducer when autograd's pass completes, as DDP does: the gradients are
// the average over ranks when backward returns, and the next backward of
// either kind works.
TEST_CASE("the reducer ends a backward nobody announced, as DDP does") {
  auto codes = run_ranks(2, [](int rank, accel::Communicator& comm) {
    std::vector<at::Tensor> params;
    for (int i = 0; i < 2; ++i) params.push_back(at::zeros({4}).requires_grad_());
    accel::GradientReducer reducer(comm, params, 32);
    for (int step = 1; step <= 2; ++step) {
      for (at::Tensor& p : params) p.mutable_grad().reset();
      const int64_t before = comm.counts().all_reduce;
      ((params[0] + params[1]).sum() * (rank + step)).backward();
      CHILD_CHECK(comm.counts().all_reduce - before == 1);  // both in one bucket
      for (const at::Tensor& p : params) CHILD_CHECK(p.grad().equal(at::full({4}, step + 0.5)));
    }
    // An announced one is the caller's to end.
    for (at::Tensor& p : params) p.mutable_grad().reset();
    reducer.caller_finishes_backward();
    ((params[0] + params[1]).sum() * (rank + 1)).backward();
    reducer.end_backward();
    reducer.finalize();
    for (const at::Tensor& p : params) CHILD_CHECK(p.grad().equal(at::full({4}, 1.5)));
  });
  REQUIRE(codes == std::vector<int>{0, 0});
}

TEST_CASE("the reducer divides by the items of all ranks, counted in its last bucket") {
  auto codes = run_ranks(2, [](int rank, accel::Communicator& comm) {
    std::vector<at::Tensor> params;
    for (int i = 0; i < 3; ++i) params.push_back(at::zeros({4}).requires_grad_());
    accel::GradientReducer reducer(comm, params, 32);
    CHILD_CHECK(reducer.num_buckets() == 2);
    // Rank 0 counted 3 items, rank 1 one: the sum over ranks is divided by 4.
    at::Tensor loss = (params[0] + params[1] + params[2]).sum() * (rank == 0 ? 3.0 : 1.0);
    const int64_t before = comm.counts().all_reduce;
    reducer.caller_finishes_backward();
    loss.backward();
    reducer.end_backward();
    reducer.finalize(rank == 0 ? 3 : 1);
    CHILD_CHECK(comm.counts().all_reduce - before == 2);  // the buckets only
    for (const at::Tensor& p : params) CHILD_CHECK(p.grad().equal(at::full({4}, 1.0)));
  });
  REQUIRE(codes == std::vector<int>{0, 0});
}

TEST_CASE("alone, the reducer copies nothing and divides by the items counted") {
  accel::SingleProcessCommunicator comm;
  at::Tensor weight = at::zeros({2}).requires_grad_();
  at::Tensor unused = at::zeros({2}).requires_grad_();
  accel::GradientReducer reducer(comm, {weight, unused});
  REQUIRE(reducer.num_buckets() == 0);
  (weight * 6.0).sum().backward();
  reducer.finalize();
  REQUIRE(weight.grad().equal(at::full({2}, 6.0)));
  reducer.finalize(3);
  REQUIRE(weight.grad().equal(at::full({2}, 2.0)));
  REQUIRE(!unused.grad().defined());
  REQUIRE(comm.counts().all_reduce == 0);
}

TEST_CASE("a pinned call site answers on every thread without asking the provider") {
  int asked = 0;
  accel::set_call_site_provider([&] {
    ++asked;
    return std::string("recipe.lua:7");
  });
  REQUIRE(accel::current_call_site() == "recipe.lua:7");
  {
    accel::PinnedCallSite site(accel::current_call_site());
    {
      accel::PinnedCallSite inner("recipe.lua:9");
      REQUIRE(accel::current_call_site() == "recipe.lua:9");
    }
    std::string elsewhere;
    std::thread([&] { elsewhere = accel::current_call_site(); }).join();
    REQUIRE(elsewhere == "recipe.lua:7");
    REQUIRE(accel::current_call_site() == "recipe.lua:7");
  }
  REQUIRE(asked == 2);  // once unpinned, once for the pin
  std::string unpinned = "-";
  std::thread([&] { unpinned = accel::current_call_site(); }).join();
  REQUIRE(unpinned.empty());  // the provider answers only its own thread
  accel::set_call_site_provider(nullptr);
}

TEST_CASE("a world of one rank communicates nothing") {
  accel::ProcessState state;
  auto comm = accel::make_communicator(state, {});
  REQUIRE(comm->size() == 1);
  at::Tensor t = at::ones({2});
  comm->all_reduce(t, accel::ReduceOp::Average);
  REQUIRE(t.equal(at::ones({2})));
  REQUIRE(comm->all_gather(t).size() == 1);

  // A shard is the whole input; a gathered buffer is the input itself.
  at::Tensor shard = at::empty({2});
  comm->reduce_scatter(shard, t, accel::ReduceOp::Sum);
  REQUIRE(shard.equal(t));
  at::Tensor gathered = at::zeros({2});
  comm->all_gather_into_async(gathered, at::full({2}, 5.0f))->wait();
  REQUIRE(gathered.equal(at::full({2}, 5.0f)));
  comm->all_gather_into(gathered, gathered);
  REQUIRE(gathered.equal(at::full({2}, 5.0f)));
  REQUIRE(comm->counts().reduce_scatter == 1);
  REQUIRE(comm->counts().all_gather == 3);
  REQUIRE_THROWS_WITH(comm->all_gather_into(gathered, at::zeros({3})),
                      Catch::Contains("all_gather_into: output has 2 elements, expected 1 rank x 3"));
}

TEST_CASE("process state comes from the launch environment") {
  ::setenv("RANK", "2", 1);
  ::setenv("WORLD_SIZE", "4", 1);
  ::setenv("LOCAL_RANK", "0", 1);
  ::setenv("LOCAL_WORLD_SIZE", "2", 1);
  ::setenv("MASTER_ADDR", "10.1.2.3", 1);
  ::setenv("MASTER_PORT", "29511", 1);
  auto state = accel::ProcessState::from_environment();
  CHECK(state.rank == 2);
  CHECK(state.world_size == 4);
  CHECK(state.local_rank == 0);
  CHECK(state.local_world_size == 2);
  CHECK(state.master_addr == "10.1.2.3");
  CHECK(state.master_port == 29511);
  CHECK_FALSE(state.is_main_process());
  CHECK(state.is_local_main_process());

  ::setenv("RANK", "4", 1);
  CHECK_THROWS_WITH(accel::ProcessState::from_environment(),
                    Catch::Contains("RANK=4 is not below WORLD_SIZE=4"));
  ::setenv("RANK", "x", 1);
  CHECK_THROWS_WITH(accel::ProcessState::from_environment(), Catch::Contains("RANK='x'"));
  for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                           "MASTER_PORT"}) {
    ::unsetenv(name);
  }
}
