// The rendezvous store: StoreServer and StoreClient over real sockets on
// 127.0.0.1, and a Gloo process group rendezvousing through them.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

// The c10d Gloo header compiles to nothing unless the build says Gloo is there.
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO 1
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "engine/launch/store_protocol.h"
#include "engine/launch/store_server.h"
#include "engine/store_client.h"

namespace {

using accel::StoreClient;
using accel::StoreServer;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kTimeout{10000};
const std::string kHost = "127.0.0.1";

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string text(const std::vector<uint8_t>& v) { return {v.begin(), v.end()}; }

long elapsed_ms(Clock::time_point since) {
  return static_cast<long>(
      std::chrono::duration_cast<milliseconds>(Clock::now() - since).count());
}

// A bare TCP connection, for speaking to the server outside the protocol.
int raw_connect(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  ::inet_pton(AF_INET, kHost.c_str(), &addr.sin_addr);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  return fd;
}

}  // namespace

TEST_CASE("store: set, get, check, delete and count keys") {
  StoreServer server(kHost, 0);
  StoreClient client(kHost, server.port(), kTimeout);

  const std::string binary("x\0y", 3);
  client.set("a", bytes(binary));
  CHECK(text(client.get("a")) == binary);
  CHECK(server.peek("a") == binary);
  CHECK_FALSE(server.peek("missing").has_value());

  client.set("b", bytes("two"));
  CHECK(client.check({"a", "b"}));
  CHECK_FALSE(client.check({"a", "missing"}));
  CHECK(client.getNumKeys() == 2);

  CHECK(client.deleteKey("a"));
  CHECK_FALSE(client.deleteKey("a"));
  CHECK(client.getNumKeys() == 1);

  // A clone is a second connection to the same data.
  const auto other = client.clone();
  CHECK(text(other->get("b")) == "two");

  CHECK_THROWS_WITH(client.add("b", 1),
                    Catch::Contains("key 'b' holds a value that is not an integer"));
}

TEST_CASE("store: add from many threads keeps an exact count") {
  StoreServer server(kHost, 0);
  StoreClient shared(kHost, server.port(), kTimeout);
  constexpr int kThreads = 8;
  constexpr int kAdds = 200;

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    // Half the threads share one connection (its mutex), half have their own.
    threads.emplace_back([&, t] {
      std::unique_ptr<StoreClient> own;
      if (t % 2) own = std::make_unique<StoreClient>(kHost, server.port(), kTimeout);
      StoreClient& client = own ? *own : shared;
      for (int i = 0; i < kAdds; ++i) client.add("counter", 1);
    });
  }
  for (auto& t : threads) t.join();

  CHECK(shared.add("counter", 0) == kThreads * kAdds);
  // Counters are decimal text, as c10d stores expect when they get() one.
  CHECK(text(shared.get("counter")) == std::to_string(kThreads * kAdds));
  CHECK(shared.add("counter", -5) == kThreads * kAdds - 5);
}

TEST_CASE("store: wait and get block until another client sets the key") {
  StoreServer server(kHost, 0);
  StoreClient waiter(kHost, server.port(), kTimeout);
  StoreClient setter(kHost, server.port(), kTimeout);

  const auto start = Clock::now();
  std::thread later([&] {
    std::this_thread::sleep_for(milliseconds(150));
    setter.set("ready", bytes("yes"));
    std::this_thread::sleep_for(milliseconds(150));
    setter.set("late", bytes("value"));
  });
  waiter.wait({"ready"});
  CHECK(elapsed_ms(start) >= 140);
  CHECK(text(waiter.get("ready")) == "yes");

  CHECK(text(waiter.get("late")) == "value");
  CHECK(elapsed_ms(start) >= 290);
  later.join();
}

TEST_CASE("store: a wait that times out names the keys still missing") {
  StoreServer server(kHost, 0);
  StoreClient client(kHost, server.port(), milliseconds(150));
  client.set("here", bytes("1"));

  const auto start = Clock::now();
  const std::string expected = "rendezvous store at " + kHost + ":" +
                               std::to_string(server.port()) +
                               ": timed out after 200 ms waiting for keys: absent1, absent2";
  CHECK_THROWS_WITH(client.wait({"here", "absent1", "absent2"}, milliseconds(200)), expected);
  const long waited = elapsed_ms(start);
  CHECK(waited >= 195);
  CHECK(waited < 2000);

  // get() and wait(keys) use the store timeout given at construction.
  CHECK_THROWS_WITH(client.get("never"),
                    Catch::EndsWith("timed out after 150 ms waiting for keys: never"));
  CHECK_THROWS_WITH(client.wait({"never"}),
                    Catch::EndsWith("timed out after 150 ms waiting for keys: never"));

  // The connection stays usable after a timeout.
  client.set("after", bytes("ok"));
  CHECK(text(client.get("after")) == "ok");
}

TEST_CASE("store: compareSet follows c10d semantics") {
  StoreServer server(kHost, 0);
  StoreClient client(kHost, server.port(), kTimeout);

  // Missing key, non-empty expected: nothing is set, expected comes back.
  CHECK(text(client.compareSet("k", bytes("old"), bytes("new"))) == "old");
  CHECK_FALSE(client.check({"k"}));

  // Missing key, empty expected: the key is created.
  CHECK(text(client.compareSet("k", {}, bytes("first"))) == "first");
  CHECK(server.peek("k") == std::string("first"));

  // Mismatch: unchanged, current value returned.
  CHECK(text(client.compareSet("k", bytes("wrong"), bytes("second"))) == "first");
  CHECK(server.peek("k") == std::string("first"));

  // Match: replaced.
  CHECK(text(client.compareSet("k", bytes("first"), bytes("second"))) == "second");
  CHECK(text(client.get("k")) == "second");
}

TEST_CASE("store: servers on port 0 get distinct ports and a taken port is refused") {
  StoreServer a(kHost, 0);
  StoreServer b(kHost, 0);
  CHECK(a.port() != 0);
  CHECK(b.port() != 0);
  CHECK(a.port() != b.port());

  CHECK_THROWS_WITH(StoreServer(kHost, a.port()),
                    Catch::Contains(kHost + ":" + std::to_string(a.port())));
}

TEST_CASE("store: a client retries connecting until the server appears") {
  uint16_t port;
  {
    StoreServer probe(kHost, 0);
    port = probe.port();
  }

  SECTION("nothing ever listens: the error names host and port") {
    const auto start = Clock::now();
    CHECK_THROWS_WITH(StoreClient(kHost, port, milliseconds(300)),
                      Catch::Contains("cannot connect to the rendezvous store at " + kHost +
                                      ":" + std::to_string(port) + " within 300 ms"));
    CHECK(elapsed_ms(start) >= 290);
  }

  SECTION("the server comes up after the client started") {
    std::unique_ptr<StoreServer> server;
    std::thread starter([&] {
      std::this_thread::sleep_for(milliseconds(200));
      server = std::make_unique<StoreServer>(kHost, port);
    });
    const auto start = Clock::now();
    StoreClient client(kHost, port, kTimeout);
    starter.join();
    CHECK(elapsed_ms(start) >= 190);
    client.set("hello", bytes("world"));
    CHECK(server->peek("hello") == std::string("world"));
  }
}

TEST_CASE("store: broken connections are dropped and others keep being served") {
  StoreServer server(kHost, 0);

  // Half a SET, then the peer closes: the partial request must not apply.
  const std::string frame =
      accel::store_protocol::Encoder(uint8_t(accel::store_protocol::Command::kSet))
          .bytes("half")
          .bytes("value")
          .finish();
  const int partial = raw_connect(server.port());
  REQUIRE(::send(partial, frame.data(), frame.size() / 2, 0) > 0);
  ::close(partial);

  // A frame claiming more than the size limit: the server hangs up.
  const int oversized = raw_connect(server.port());
  const char header[4] = {'\xff', '\xff', '\xff', '\xff'};
  REQUIRE(::send(oversized, header, sizeof header, 0) == sizeof header);
  char byte;
  CHECK(::recv(oversized, &byte, 1, 0) == 0);
  ::close(oversized);

  StoreClient client(kHost, server.port(), kTimeout);
  client.set("whole", bytes("value"));
  CHECK(text(client.get("whole")) == "value");
  CHECK_FALSE(client.check({"half"}));
  CHECK(client.getNumKeys() == 1);
}

TEST_CASE("store: destroying the server ends a parked wait at once") {
  auto server = std::make_unique<StoreServer>(kHost, 0);
  StoreClient client(kHost, server->port(), kTimeout);
  const std::string where = kHost + ":" + std::to_string(server->port());

  std::string error;
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    try {
      client.wait({"never"}, StoreClient::kNoTimeout);
    } catch (const std::exception& e) {
      error = e.what();
    }
    returned = true;
  });
  std::this_thread::sleep_for(milliseconds(100));
  CHECK_FALSE(returned);

  const auto start = Clock::now();
  server.reset();
  CHECK(elapsed_ms(start) < 1000);
  waiter.join();
  CHECK(error == "lost connection to the rendezvous store at " + where + ": closed by the store");
  // Later calls fail the same way rather than hanging.
  CHECK_THROWS_WITH(client.getNumKeys(), Catch::StartsWith("lost connection"));
}

TEST_CASE("store: a Gloo process group of two ranks allreduces over StoreClient") {
  StoreServer server(kHost, 0);
  constexpr int kWorld = 2;
  std::vector<at::Tensor> results(kWorld);
  std::vector<std::string> errors(kWorld);

  // Catch2 assertions are not thread-safe: ranks record, the main thread checks.
  const auto rank_main = [&](int rank) {
    try {
      auto store = c10::make_intrusive<StoreClient>(kHost, server.port(), kTimeout);
      auto options = c10d::ProcessGroupGloo::Options::create(kTimeout);
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(kHost));
      c10d::ProcessGroupGloo group(store, rank, kWorld, options);
      std::vector<at::Tensor> tensors{at::full({4}, static_cast<float>(rank + 1))};
      group.allreduce(tensors)->wait();
      results[rank] = tensors[0];
    } catch (const std::exception& e) {
      errors[rank] = e.what();
    }
  };
  std::vector<std::thread> ranks;
  for (int r = 0; r < kWorld; ++r) ranks.emplace_back(rank_main, r);
  for (auto& t : ranks) t.join();

  for (int r = 0; r < kWorld; ++r) {
    INFO("rank " << r);
    REQUIRE(errors[r].empty());
    CHECK(at::equal(results[r], at::full({4}, 3.0f)));
  }
  // The rendezvous really went through this store.
  StoreClient observer(kHost, server.port(), kTimeout);
  CHECK(observer.getNumKeys() > 0);
}
