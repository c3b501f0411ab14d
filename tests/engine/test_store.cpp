// The rendezvous store: StoreServer and C10dStore over real sockets on
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

#include "engine/comm/c10d_store.h"
#include "engine/launch/store_server.h"
#include "engine/protocol/store_protocol.h"

namespace {

using accel::C10dStore;
using accel::StoreServer;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kTimeout{10000};
const std::string kHost = "127.0.0.1";
const std::string kToken = "test-token";

accel::StoreAddress address(uint16_t port) { return {kHost, port, kToken}; }

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
  StoreServer server(kHost, 0, kToken);
  C10dStore client(address(server.port()), kTimeout);

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
  StoreServer server(kHost, 0, kToken);
  C10dStore shared(address(server.port()), kTimeout);
  constexpr int kThreads = 8;
  constexpr int kAdds = 200;

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    // Half the threads share one connection (its mutex), half have their own.
    threads.emplace_back([&, t] {
      std::unique_ptr<C10dStore> own;
      if (t % 2) own = std::make_unique<C10dStore>(address(server.port()), kTimeout);
      C10dStore& client = own ? *own : shared;
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
  StoreServer server(kHost, 0, kToken);
  C10dStore waiter(address(server.port()), kTimeout);
  C10dStore setter(address(server.port()), kTimeout);

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
  StoreServer server(kHost, 0, kToken);
  C10dStore client(address(server.port()), milliseconds(150));
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
  StoreServer server(kHost, 0, kToken);
  C10dStore client(address(server.port()), kTimeout);

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
  StoreServer a(kHost, 0, kToken);
  StoreServer b(kHost, 0, kToken);
  CHECK(a.port() != 0);
  CHECK(b.port() != 0);
  CHECK(a.port() != b.port());

  CHECK_THROWS_WITH(StoreServer(kHost, a.port(), kToken),
                    Catch::Contains(kHost + ":" + std::to_string(a.port())));
}

TEST_CASE("store: a client retries connecting until the server appears") {
  uint16_t port;
  {
    StoreServer probe(kHost, 0, kToken);
    port = probe.port();
  }

  SECTION("nothing ever listens: the error names host and port") {
    const auto start = Clock::now();
    CHECK_THROWS_WITH(C10dStore(address(port), milliseconds(300)),
                      Catch::Contains("cannot reach the rendezvous store at " + kHost + ":" +
                                      std::to_string(port)));
    CHECK(elapsed_ms(start) >= 290);
  }

  SECTION("the server comes up after the client started") {
    std::unique_ptr<StoreServer> server;
    std::thread starter([&] {
      std::this_thread::sleep_for(milliseconds(200));
      server = std::make_unique<StoreServer>(kHost, port, kToken);
    });
    const auto start = Clock::now();
    C10dStore client(address(port), kTimeout);
    starter.join();
    CHECK(elapsed_ms(start) >= 190);
    client.set("hello", bytes("world"));
    CHECK(server->peek("hello") == std::string("world"));
  }
}

// What a peer without the token gets back: the first reply's body, or ""
// when the store hung up without one.
std::string first_reply(int fd) {
  std::string got;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) got.append(buf, static_cast<size_t>(n));
  const auto length = accel::store_protocol::frame_body_length(got);
  if (!length || got.size() < 4 + *length) return "";
  return got.substr(4, *length);
}

TEST_CASE("store: broken connections are dropped and others keep being served") {
  StoreServer server(kHost, 0, kToken);

  // Half a SET, then the peer closes: the partial request must not apply.
  const std::string frame =
      accel::store_protocol::Encoder(uint8_t(accel::store_protocol::Command::kSet))
          .bytes("half")
          .bytes("value")
          .finish();
  const int partial = raw_connect(server.port());
  REQUIRE(::send(partial, frame.data(), frame.size() / 2, 0) > 0);
  ::close(partial);

  // A frame claiming more than the size limit: the server says what a
  // greeting may hold and hangs up.
  const int oversized = raw_connect(server.port());
  const char header[4] = {'\xff', '\xff', '\xff', '\xff'};
  REQUIRE(::send(oversized, header, sizeof header, 0) == sizeof header);
  const std::string refusal = first_reply(oversized);  // ends when the store hangs up
  CHECK_THAT(refusal, Catch::Contains("a token of at most 1019 bytes"));
  ::close(oversized);

  C10dStore client(address(server.port()), kTimeout);
  client.set("whole", bytes("value"));
  CHECK(text(client.get("whole")) == "value");
  CHECK_FALSE(client.check({"half"}));
  CHECK(client.getNumKeys() == 1);
}

TEST_CASE("store: only a connection that presents the run's token may use it") {
  namespace proto = accel::store_protocol;
  StoreServer server(kHost, 0, kToken);

  SECTION("a request before the greeting is refused and the connection closed") {
    const int fd = raw_connect(server.port());
    const std::string set =
        proto::Encoder(uint8_t(proto::Command::kSet)).bytes("rdzv/0/failed").bytes("forged").finish();
    REQUIRE(::send(fd, set.data(), set.size(), 0) == static_cast<ssize_t>(set.size()));
    const std::string reply = first_reply(fd);  // ends when the store hangs up
    ::close(fd);
    REQUIRE_FALSE(reply.empty());
    proto::Decoder d(reply);
    CHECK(d.u8() == uint8_t(proto::Status::kError));
    CHECK_THAT(d.bytes(), Catch::Contains("must present the rendezvous token first"));
    CHECK_FALSE(server.peek("rdzv/0/failed").has_value());
  }

  SECTION("a wrong token is named as such") {
    CHECK_THROWS_WITH(C10dStore(accel::StoreAddress{kHost, server.port(), "guess"}, kTimeout),
                      Catch::Contains("wrong rendezvous token"));
    CHECK_THROWS_WITH(C10dStore(accel::StoreAddress{kHost, server.port(), ""}, kTimeout),
                      Catch::Contains("wrong rendezvous token"));
    C10dStore right(address(server.port()), kTimeout);
    right.set("k", bytes("v"));
    CHECK(server.peek("k") == std::string("v"));
  }

  SECTION("a stranger may send no more than a greeting") {
    // Its frame claims 1 MiB, far under the limit for the run's own ranks:
    // the store answers that a token is shorter and hangs up at once
    // instead of buffering it.
    const int fd = raw_connect(server.port());
    std::string big(4, '\0');
    const uint32_t claimed = 1u << 20;
    for (int i = 0; i < 4; ++i) big[i] = static_cast<char>(claimed >> (8 * i));
    big += std::string(64 << 10, 'x');
    ::send(fd, big.data(), big.size(), MSG_NOSIGNAL);
    const std::string reply = first_reply(fd);
    ::close(fd);
    REQUIRE_FALSE(reply.empty());
    proto::Decoder d(reply);
    CHECK(d.u8() == uint8_t(proto::Status::kError));
    CHECK_THAT(d.bytes(), Catch::Contains("a token of at most 1019 bytes"));
  }

  SECTION("a token longer than a greeting holds is answered, not dropped") {
    const std::string longest(proto::kMaxTokenBytes, 't');
    StoreServer long_token(kHost, 0, longest);
    C10dStore fits(accel::StoreAddress{kHost, long_token.port(), longest}, kTimeout);
    fits.set("k", bytes("v"));
    CHECK_THROWS_WITH(C10dStore(accel::StoreAddress{kHost, long_token.port(), longest + "t"}, kTimeout),
                      Catch::Contains("a token of at most 1019 bytes"));
  }

  CHECK_THROWS(StoreServer(kHost, 0, ""));
}

TEST_CASE("store: a crowd of strangers cannot keep the run's ranks out") {
  accel::StoreLimits limits;
  limits.max_unauthenticated_per_address = 4;
  limits.hello_timeout = milliseconds(400);
  StoreServer server(kHost, 0, kToken, limits);
  std::vector<int> idle;
  for (int i = 0; i < 4; ++i) idle.push_back(raw_connect(server.port()));
  std::this_thread::sleep_for(milliseconds(50));  // the store has taken all four

  // A fifth from the same address takes the oldest stranger's place at once.
  const auto start = Clock::now();
  C10dStore client(address(server.port()), kTimeout);
  CHECK(elapsed_ms(start) < 300);
  client.set("in", bytes("yes"));
  CHECK(first_reply(idle.front()).empty());  // the oldest: hung up on, unanswered
  for (int fd : idle) ::close(fd);
}

TEST_CASE("store: strangers that never greet are dropped after the greeting's time") {
  accel::StoreLimits limits;
  limits.hello_timeout = milliseconds(200);
  StoreServer server(kHost, 0, kToken, limits);
  const int idle = raw_connect(server.port());
  const auto start = Clock::now();
  CHECK(first_reply(idle).empty());  // ends when the store hangs up
  CHECK(elapsed_ms(start) >= 150);
  ::close(idle);
}

TEST_CASE("store: a greeting nobody answers says the store accepted no connection") {
  // A listening socket that never accepts: the kernel connects, nobody reads.
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in where{};
  where.sin_family = AF_INET;
  where.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&where), sizeof where) == 0);
  REQUIRE(::listen(listener, 8) == 0);
  socklen_t length = sizeof where;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&where), &length);
  CHECK_THROWS_WITH(accel::StoreConnection(accel::StoreAddress{kHost, ntohs(where.sin_port), kToken},
                                           Clock::now() + kTimeout, milliseconds(300)),
                    Catch::Contains("accepted no connection within 0.3 s"));
  ::close(listener);
}

TEST_CASE("store: no more connections than the limit are served at once") {
  accel::StoreLimits limits;
  limits.max_connections = 2;
  StoreServer server(kHost, 0, kToken, limits);
  auto one = std::make_unique<accel::StoreConnection>(address(server.port()), Clock::now() + kTimeout);
  accel::StoreConnection two(address(server.port()), Clock::now() + kTimeout);
  // The third is connected by the kernel but not served: its greeting goes unanswered.
  CHECK_THROWS_WITH(accel::StoreConnection(address(server.port()), Clock::now() + kTimeout, milliseconds(300)),
                    Catch::Contains("accepted no connection within 0.3 s"));
  one.reset();
  accel::StoreConnection three(address(server.port()), Clock::now() + kTimeout);
  three.set("third", "in");
  CHECK(server.peek("third") == std::string("in"));
}

TEST_CASE("store: what the store holds and what one frame carries are bounded") {
  accel::StoreLimits limits;
  limits.max_stored_bytes = 1000;
  StoreServer server(kHost, 0, kToken, limits);
  C10dStore client(address(server.port()), kTimeout);
  client.set("a", std::vector<uint8_t>(600, 1));
  CHECK_THROWS_WITH(client.set("b", std::vector<uint8_t>(600, 2)), Catch::Contains("the store is full"));
  CHECK_FALSE(client.check({"b"}));
  client.set("a", std::vector<uint8_t>(995, 3));  // a replaced value frees its old bytes
  CHECK_THROWS_WITH(client.add("counter", 1), Catch::Contains("the store is full"));
  CHECK(client.deleteKey("a"));
  client.set("b", std::vector<uint8_t>(600, 2));
  CHECK(client.add("counter", 5) == 5);

  // A frame over the protocol's limit ends the connection that sent it.
  C10dStore greedy(address(server.port()), kTimeout);
  CHECK_THROWS_WITH(greedy.set("huge", std::vector<uint8_t>(accel::store_protocol::kMaxFrameBytes, 0)),
                    Catch::StartsWith("lost the rendezvous store"));
  CHECK(client.getNumKeys() == 2);
}

TEST_CASE("store: destroying the server ends a parked wait at once") {
  auto server = std::make_unique<StoreServer>(kHost, 0, kToken);
  C10dStore client(address(server->port()), kTimeout);
  const std::string where = kHost + ":" + std::to_string(server->port());

  std::string error;
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    try {
      client.wait({"never"}, C10dStore::kNoTimeout);
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
  CHECK(error == "lost the rendezvous store at " + where + ": closed by the store");
  // Later calls fail the same way rather than hanging.
  CHECK_THROWS_WITH(client.getNumKeys(), Catch::StartsWith("lost the rendezvous store"));
}

TEST_CASE("store: a Gloo process group of two ranks allreduces over C10dStore") {
  StoreServer server(kHost, 0, kToken);
  constexpr int kWorld = 2;
  std::vector<at::Tensor> results(kWorld);
  std::vector<std::string> errors(kWorld);

  // Catch2 assertions are not thread-safe: ranks record, the main thread checks.
  const auto rank_main = [&](int rank) {
    try {
      auto store = c10::make_intrusive<C10dStore>(address(server.port()), kTimeout);
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
  C10dStore observer(address(server.port()), kTimeout);
  CHECK(observer.getNumKeys() > 0);
}
