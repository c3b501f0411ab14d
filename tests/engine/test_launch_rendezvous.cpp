// Launchers of several nodes meeting on node 0's store, over real sockets:
// all arrive, a missing node is named at the timeout, a node rank claimed
// twice and unequal process counts are refused, a node waits for a store
// that starts late, and one node's failure reaches the others. Also the
// launcher's torch-free store connection itself.
#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <optional>
#include <string>
#include <thread>

#include "engine/launch/node_rendezvous.h"
#include "engine/protocol/store_connection.h"
#include "engine/launch/store_server.h"

namespace {

using accel::NodeRendezvous;
using accel::RendezvousError;
using accel::StoreServer;
using Catch::Matchers::Contains;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

const std::string kToken = "test-token";

// Runs node `rank`'s meeting on another thread; the future holds its error, "" for none.
std::future<std::string> meet_async(uint16_t port, int round, int rank, int nnodes, int nproc,
                                    milliseconds timeout) {
  return std::async(std::launch::async, [=] {
    try {
      NodeRendezvous(accel::StoreAddress{"127.0.0.1", port, kToken}, round, rank, nnodes)
          .meet(nproc, timeout);
      return std::string();
    } catch (const RendezvousError& e) {
      return std::string(e.what());
    }
  });
}

}  // namespace

TEST_CASE("the launcher's store connection sets, gets, adds and waits", "[rendezvous]") {
  StoreServer server("127.0.0.1", 0, kToken);
  accel::StoreConnection store(accel::StoreAddress{"127.0.0.1", server.port(), kToken}, Clock::now() + seconds(5));
  CHECK_FALSE(store.get("k"));
  store.set("k", "v");
  CHECK(store.get("k") == "v");
  CHECK(server.peek("k") == "v");
  CHECK(store.add("n", 2) == 2);
  CHECK(store.add("n", 3) == 5);
  auto start = Clock::now();
  CHECK(store.wait({"k", "absent"}, milliseconds(200)) == std::vector<std::string>{"absent"});
  CHECK(Clock::now() - start >= milliseconds(190));
  CHECK(store.wait({"k"}, milliseconds(200)).empty());
}

TEST_CASE("a store nobody serves is named after the deadline", "[rendezvous]") {
  uint16_t port;
  {
    StoreServer gone("127.0.0.1", 0, kToken);
    port = gone.port();
  }
  auto start = Clock::now();
  try {
    accel::StoreConnection(accel::StoreAddress{"127.0.0.1", port, kToken}, Clock::now() + milliseconds(300));
    FAIL("connected to a closed port");
  } catch (const accel::StoreUnreachable& e) {
    CHECK_THAT(e.what(), Contains("cannot reach the rendezvous store at 127.0.0.1:" + std::to_string(port)));
  }
  CHECK(Clock::now() - start >= milliseconds(300));
}

TEST_CASE("three nodes meet", "[rendezvous]") {
  StoreServer server("127.0.0.1", 0, kToken);
  auto a = meet_async(server.port(), 0, 0, 3, 2, seconds(10));
  auto b = meet_async(server.port(), 0, 1, 3, 2, seconds(10));
  auto c = meet_async(server.port(), 0, 2, 3, 2, seconds(10));
  CHECK(a.get().empty());
  CHECK(b.get().empty());
  CHECK(c.get().empty());
}

TEST_CASE("a node that does not arrive is named at the timeout", "[rendezvous]") {
  StoreServer server("127.0.0.1", 0, kToken);
  auto start = Clock::now();
  auto a = meet_async(server.port(), 0, 0, 3, 2, milliseconds(800));
  auto c = meet_async(server.port(), 0, 2, 3, 2, milliseconds(800));
  std::string error = a.get();
  CHECK_THAT(error, Contains("node 1 did not (expected 3 nodes)"));
  CHECK_THAT(error, Contains("127.0.0.1:" + std::to_string(server.port())));
  CHECK_THAT(c.get(), Contains("node 1 did not"));
  CHECK(Clock::now() - start < seconds(5));
}

TEST_CASE("nodes with different process counts are refused", "[rendezvous]") {
  StoreServer server("127.0.0.1", 0, kToken);
  auto a = meet_async(server.port(), 0, 0, 2, 2, seconds(10));
  auto b = meet_async(server.port(), 0, 1, 2, 3, seconds(10));
  std::string error = a.get();
  CHECK_THAT(error, Contains("every node must run the same number of processes"));
  CHECK_THAT(error, Contains("node 0 2"));
  CHECK_THAT(error, Contains("node 1 3"));
  CHECK_FALSE(b.get().empty());
}

TEST_CASE("a node rank claimed by two launchers is refused", "[rendezvous]") {
  StoreServer server("127.0.0.1", 0, kToken);
  accel::StoreConnection impostor(accel::StoreAddress{"127.0.0.1", server.port(), kToken}, Clock::now() + seconds(5));
  // Node 1 registers and waits for node 0; meanwhile another launcher
  // claims node rank 1 too, then node 0 arrives.
  auto one = meet_async(server.port(), 0, 1, 2, 1, seconds(10));
  std::this_thread::sleep_for(milliseconds(300));
  impostor.set("rdzv/0/node/1", "elsewhere:77 nproc=1");
  auto zero = meet_async(server.port(), 0, 0, 2, 1, seconds(10));
  std::string error = one.get();
  CHECK_THAT(error, Contains("two launchers claim node rank 1"));
  CHECK_THAT(error, Contains("and elsewhere:77"));
  CHECK(zero.get().empty());
}

TEST_CASE("a node waits for node 0's store to come up", "[rendezvous]") {
  uint16_t port;
  {
    StoreServer probe("127.0.0.1", 0, kToken);
    port = probe.port();
  }
  auto b = meet_async(port, 0, 1, 2, 1, seconds(10));
  std::this_thread::sleep_for(milliseconds(500));
  StoreServer server("127.0.0.1", port, kToken);
  auto a = meet_async(port, 0, 0, 2, 1, seconds(10));
  CHECK(a.get().empty());
  CHECK(b.get().empty());
}

TEST_CASE("one node's failure reaches the others; node 0 going away too", "[rendezvous]") {
  std::optional<StoreServer> server(std::in_place, "127.0.0.1", 0, kToken);
  uint16_t port = server->port();
  NodeRendezvous zero(accel::StoreAddress{"127.0.0.1", port, kToken}, 0, 0, 2);
  NodeRendezvous one(accel::StoreAddress{"127.0.0.1", port, kToken}, 0, 1, 2);
  auto met = std::async(std::launch::async, [&] { zero.meet(1, seconds(10)); });
  one.meet(1, seconds(10));
  met.get();
  CHECK_FALSE(zero.news());
  one.publish_failure("rank 1 failed");
  CHECK(zero.news() == "node 1 failed (rank 1 failed)");
  CHECK_FALSE(one.news());  // its own news is not news to it

  server.reset();
  auto start = Clock::now();
  std::optional<std::string> news;
  while (!news && Clock::now() - start < seconds(20)) {
    news = one.news();
    std::this_thread::sleep_for(milliseconds(200));
  }
  REQUIRE(news);
  CHECK_THAT(*news, Contains("node 0's launcher ended"));
  CHECK(Clock::now() - start >= seconds(9));
}
