#include "engine/launch/store_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/protocol/store_protocol.h"

namespace accel {
namespace {

namespace proto = store_protocol;
using Clock = std::chrono::steady_clock;

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~Fd() { reset(); }
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int fd_;
};

struct Connection {
  Fd fd;
  std::string in;   // received bytes not yet consumed as requests
  std::string out;  // reply bytes the socket has not yet taken
  // A WAIT is pending: later requests stay queued in `in` so replies keep
  // their order.
  bool parked = false;
  bool dead = false;
  bool authenticated = false;  // presented the run's token
  Clock::time_point hello_deadline;
  std::string peer;       // the peer's address, for the cap on strangers per address
  uint64_t accepted = 0;  // the order of acceptance: the lowest is the oldest

  // What the connection may have buffered either way: one request (two for
  // a client that pipelines behind a parked WAIT) before it is served, and
  // as much reply before the peer must have read some.
  size_t in_limit() const {
    return authenticated ? 2 * (proto::kFrameHeaderBytes + proto::kMaxFrameBytes)
                         : proto::kFrameHeaderBytes + proto::kMaxHelloBytes;
  }
  static constexpr size_t kOutLimit = 2 * (proto::kFrameHeaderBytes + proto::kMaxFrameBytes);
};

// Compares in time independent of where the texts differ, so a peer cannot
// find the token a byte at a time by timing its refusals.
bool same_token(const std::string& given, const std::string& token) {
  unsigned char diff = given.size() == token.size() ? 0 : 1;
  for (size_t i = 0; i < given.size(); ++i)
    diff |= static_cast<unsigned char>(given[i] ^ token[i % token.size()]);
  return diff == 0;
}

struct ParkedWait {
  int fd;
  std::vector<std::string> keys;
  std::optional<Clock::time_point> deadline;
};

// Sockets are CLOEXEC: the launcher forks workers, which must not inherit them.
Fd listen_on(const std::string& host, uint16_t port) {
  const std::string where = host + ":" + std::to_string(port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(),
                               std::to_string(port).c_str(), &hints, &found);
  if (rc != 0)
    throw std::runtime_error("rendezvous store: cannot resolve " + where + ": " +
                             ::gai_strerror(rc));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(found, ::freeaddrinfo);

  std::string last_error = "no address found";
  for (const addrinfo* ai = found; ai; ai = ai->ai_next) {
    Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                   ai->ai_protocol));
    if (!fd) {
      last_error = std::strerror(errno);
      continue;
    }
    // A restarted launcher must be able to rebind a port left in TIME_WAIT.
    const int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) == 0 &&
        ::listen(fd.get(), SOMAXCONN) == 0)
      return fd;
    last_error = std::strerror(errno);
  }
  throw std::runtime_error("rendezvous store: cannot listen on " + where + ": " +
                           last_error);
}

uint16_t bound_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw std::runtime_error(std::string("rendezvous store: getsockname: ") +
                             std::strerror(errno));
  if (addr.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

// A peer's IP address, without its port: strangers are counted per address.
std::string peer_address(const sockaddr_storage& address) {
  char text[INET6_ADDRSTRLEN] = "";
  if (address.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(address).sin_addr, text, sizeof text);
  } else if (address.ss_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(address).sin6_addr, text, sizeof text);
  }
  return text;
}

std::string status_only(proto::Status s) {
  return proto::Encoder(static_cast<uint8_t>(s)).finish();
}

std::string error_reply(const std::string& message) {
  return proto::Encoder(static_cast<uint8_t>(proto::Status::kError)).bytes(message).finish();
}

// The answer to a stranger that sent more than a greeting may hold (a
// launcher checks its token's size before it connects; this is another
// client, or a hand-set token).
std::string greeting_too_long() {
  return error_reply("a connection's first request is one HELLO of at most " +
                     std::to_string(proto::kMaxHelloBytes) + " bytes, a token of at most " +
                     std::to_string(proto::kMaxTokenBytes) + " bytes; this one is longer");
}

proto::Encoder ok() { return proto::Encoder(static_cast<uint8_t>(proto::Status::kOk)); }

}  // namespace

struct StoreServer::Impl {
  Impl(const std::string& host, uint16_t requested_port, std::string run_token, StoreLimits limits_)
      : token(std::move(run_token)),
        limits(limits_),
        listener(listen_on(host, requested_port)),
        wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
        port(bound_port(listener.get())) {
    if (token.empty()) throw std::invalid_argument("rendezvous store: the run's token is empty");
    if (!wake)
      throw std::runtime_error(std::string("rendezvous store: eventfd: ") +
                               std::strerror(errno));
    thread = std::thread([this] { run(); });
  }

  ~Impl() {
    const uint64_t one = 1;
    // Cannot fail short of a counter overflow; the thread wakes either way.
    (void)!::write(wake.get(), &one, sizeof one);
    thread.join();
  }

  void run() {
    std::vector<pollfd> fds;
    for (;;) {
      fds.clear();
      fds.push_back({wake.get(), POLLIN, 0});
      fds.push_back({listener.get(), static_cast<short>(accepting() ? POLLIN : 0), 0});
      for (const auto& [fd, c] : connections)
        fds.push_back({fd, static_cast<short>(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});

      if (::poll(fds.data(), fds.size(), poll_timeout_ms()) < 0) {
        if (errno == EINTR) continue;
        std::fprintf(stderr, "rendezvous store on port %u stopped: poll: %s\n",
                     unsigned(port), std::strerror(errno));
        return;
      }
      if (fds[0].revents) return;
      if (fds[1].revents & POLLIN) accept_all();
      for (size_t i = 2; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        Connection& c = connections.at(fds[i].fd);
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
          receive(c);
          serve(c);
        }
        if (fds[i].revents & POLLOUT) flush(c);
      }
      settle_waits();
      expire_strangers();
      drop_dead();
    }
  }

  // Whether to take new connections now (see StoreLimits::max_connections);
  // strangers never stop it (make_room_for).
  bool accepting() const {
    return connections.size() < limits.max_connections && Clock::now() >= accept_paused_until;
  }

  // Closes the oldest living stranger (from `peer`, or from anywhere when
  // it is empty) when there are `cap` or more: the newcomer takes its place.
  void make_room_for(const std::string& peer, size_t cap) {
    size_t count = 0;
    Connection* oldest = nullptr;
    for (auto& [fd, c] : connections) {
      if (c.authenticated || c.dead || (!peer.empty() && c.peer != peer)) continue;
      ++count;
      if (!oldest || c.accepted < oldest->accepted) oldest = &c;
    }
    if (count >= cap && oldest) oldest->dead = true;
  }

  int poll_timeout_ms() const {
    std::optional<Clock::time_point> first;
    const auto earlier = [&first](Clock::time_point t) {
      if (!first || t < *first) first = t;
    };
    for (const auto& w : waits)
      if (w.deadline) earlier(*w.deadline);
    for (const auto& [fd, c] : connections)
      if (!c.authenticated) earlier(c.hello_deadline);
    if (Clock::now() < accept_paused_until) earlier(accept_paused_until);
    if (!first) return -1;
    const auto left = std::chrono::duration<double, std::milli>(*first - Clock::now());
    // Round up so the wake-up lands after the deadline, not just before it;
    // a deadline weeks away (a WAIT may ask for a century) wakes poll() early
    // rather than overflowing its int.
    constexpr double kLongestPollMs = 1 << 30;
    return left.count() <= 0 ? 0 : static_cast<int>(std::ceil(std::min(left.count(), kLongestPollMs)));
  }

  // Takes the connections waiting in the backlog, a bounded number a turn:
  // a crowd that reconnects as fast as it is dropped must not keep the
  // loop from serving the connections it has.
  void accept_all() {
    constexpr int kAcceptsPerTurn = 32;
    for (int taken = 0; taken < kAcceptsPerTurn && accepting(); ++taken) {
      sockaddr_storage address{};
      socklen_t length = sizeof address;
      Fd fd(::accept4(listener.get(), reinterpret_cast<sockaddr*>(&address), &length,
                      SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!fd) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        // Out of descriptors: the listener stays readable, so polling it
        // again at once would spin. Serve the open connections for a while.
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
          accept_paused_until = Clock::now() + std::chrono::milliseconds(100);
        return;  // EAGAIN: backlog drained; anything else: retried on the next poll
      }
      const int one = 1;
      ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      const std::string peer = peer_address(address);
      make_room_for(peer, limits.max_unauthenticated_per_address);
      make_room_for("", limits.max_unauthenticated);
      const int key = fd.get();
      Connection& c = connections[key];
      c.fd = std::move(fd);
      c.hello_deadline = Clock::now() + limits.hello_timeout;
      c.peer = peer;
      c.accepted = ++accepted_count;
    }
  }

  // Hangs up on connections that did not present the token in time.
  void expire_strangers() {
    const auto now = Clock::now();
    for (auto& [fd, c] : connections)
      if (!c.authenticated && now >= c.hello_deadline) c.dead = true;
  }

  void receive(Connection& c) {
    char buf[65536];
    for (;;) {
      // Never more than the connection may hold, plus one byte to notice it.
      const size_t room = c.in_limit() - std::min(c.in.size(), c.in_limit());
      const ssize_t n = ::recv(c.fd.get(), buf, std::min(sizeof buf, room + 1), 0);
      if (n > 0) {
        if (static_cast<size_t>(n) > room) {
          // More than any request the protocol allows; a stranger is told
          // what a greeting may hold.
          if (!c.authenticated) reply(c, greeting_too_long());
          c.dead = true;
          return;
        }
        c.in.append(buf, static_cast<size_t>(n));
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        // 0 is an orderly close; EAGAIN means drained; other errors are fatal.
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) c.dead = true;
        return;
      }
    }
  }

  void flush(Connection& c) {
    while (!c.out.empty() && !c.dead) {
      const ssize_t n = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL);
      if (n >= 0) {
        c.out.erase(0, static_cast<size_t>(n));
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return;  // the rest goes when poll reports POLLOUT
      } else if (errno != EINTR) {
        c.dead = true;
      }
    }
  }

  void reply(Connection& c, std::string frame) {
    c.out += frame;
    flush(c);
    // A peer that sends requests but never reads the replies.
    if (c.out.size() > Connection::kOutLimit) c.dead = true;
  }

  // Handles every complete request in c.in, stopping at a parked WAIT.
  // A partial request stays buffered; if the peer closes, drop_dead discards it.
  void serve(Connection& c) {
    try {
      while (!c.parked && !c.dead) {
        const auto length = proto::frame_body_length(
            c.in, c.authenticated ? proto::kMaxFrameBytes : proto::kMaxHelloBytes);
        if (!length || c.in.size() < proto::kFrameHeaderBytes + *length) return;
        const std::string body = c.in.substr(proto::kFrameHeaderBytes, *length);
        c.in.erase(0, proto::kFrameHeaderBytes + *length);
        handle(c, body);
      }
    } catch (const proto::ProtocolError&) {
      // A HELLO longer than any token the store takes: say so (a launcher
      // checks its token's size first; this is another client's).
      if (!c.authenticated) reply(c, greeting_too_long());
      c.dead = true;  // a malformed stream cannot be resynchronised
    }
  }

  void handle(Connection& c, const std::string& body) {
    proto::Decoder d(body);
    const auto command = static_cast<proto::Command>(d.u8());
    if (!c.authenticated) return greet(c, command, d);
    std::lock_guard<std::mutex> lock(data_mutex);
    switch (command) {
      case proto::Command::kSet: {
        std::string key = d.bytes();
        return store(c, key, d.bytes(), [this, &c] { reply(c, ok().finish()); });
      }
      case proto::Command::kGet: {
        const auto it = data.find(d.bytes());
        if (it == data.end()) return reply(c, status_only(proto::Status::kNotFound));
        return reply(c, ok().bytes(it->second).finish());
      }
      case proto::Command::kAdd: {
        const std::string key = d.bytes();
        return add(c, key, d.i64());
      }
      case proto::Command::kCheck:
        return reply(c, ok().u8(missing(d.keys()).empty()).finish());
      case proto::Command::kDelete: {
        const auto it = data.find(d.bytes());
        if (it == data.end()) return reply(c, ok().u8(0).finish());
        stored_bytes -= it->first.size() + it->second.size();
        data.erase(it);
        return reply(c, ok().u8(1).finish());
      }
      case proto::Command::kNumKeys:
        return reply(c, ok().i64(static_cast<int64_t>(data.size())).finish());
      case proto::Command::kWait: {
        const int64_t timeout_ms = d.i64();
        std::vector<std::string> keys = d.keys();
        if (missing(keys).empty()) return reply(c, ok().finish());
        waits.push_back({c.fd.get(), std::move(keys), proto::deadline_after(timeout_ms)});
        c.parked = true;
        return;
      }
      case proto::Command::kCompareSet: {
        std::string key = d.bytes();
        std::string expected = d.bytes();
        std::string desired = d.bytes();
        return compare_set(c, key, expected, desired);
      }
      case proto::Command::kHello:
        return reply(c, ok().finish());  // already authenticated
    }
    reply(c, error_reply("unknown store command " + std::to_string(unsigned(command))));
  }

  // The first request of a connection: HELLO with the run's token, or the
  // connection ends (after an Error that tells an honest peer why).
  void greet(Connection& c, proto::Command command, proto::Decoder& d) {
    if (command == proto::Command::kHello && same_token(d.bytes(), token)) {
      c.authenticated = true;
      return reply(c, ok().finish());
    }
    reply(c, error_reply(command == proto::Command::kHello
                             ? "wrong rendezvous token: give every node the run's --rdzv-token "
                               "(or ACCEL_RDZV_TOKEN)"
                             : "a connection must present the rendezvous token first"));
    c.dead = true;
  }

  // Sets key to value unless the store would then hold more than its limit;
  // `done` replies on success.
  template <typename Done>
  void store(Connection& c, const std::string& key, std::string value, Done done) {
    const auto it = data.find(key);
    const size_t old = it == data.end() ? 0 : key.size() + it->second.size();
    const size_t after = stored_bytes - old + key.size() + value.size();
    if (after > limits.max_stored_bytes)
      return reply(c, error_reply("the store is full: it holds at most " +
                                  std::to_string(limits.max_stored_bytes) +
                                  " bytes of keys and values"));
    stored_bytes = after;
    data[key] = std::move(value);
    done();
  }

  // Counters are stored as decimal text, so get() on a counter reads as c10d expects.
  void add(Connection& c, const std::string& key, int64_t delta) {
    int64_t value = 0;
    const auto it = data.find(key);
    if (it != data.end()) {
      const std::string& text = it->second;
      const auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (err != std::errc() || end != text.data() + text.size())
        return reply(c, proto::Encoder(static_cast<uint8_t>(proto::Status::kError))
                            .bytes("add: key '" + key + "' holds a value that is not an integer")
                            .finish());
    }
    if (__builtin_add_overflow(value, delta, &value))
      return reply(c, proto::Encoder(static_cast<uint8_t>(proto::Status::kError))
                          .bytes("add: key '" + key + "' would pass the range of a 64-bit integer")
                          .finish());
    store(c, key, std::to_string(value), [&] { reply(c, ok().i64(value).finish()); });
  }

  // c10d semantics: a missing key is created only when `expected` is empty; a
  // missing key with non-empty `expected` answers `expected` unchanged.
  void compare_set(Connection& c, const std::string& key, const std::string& expected,
                   std::string& desired) {
    const auto it = data.find(key);
    const bool replaces = it == data.end() ? expected.empty() : it->second == expected;
    if (!replaces) {
      const std::string& now = it == data.end() ? expected : it->second;
      return reply(c, ok().bytes(now).finish());
    }
    store(c, key, desired, [&] { reply(c, ok().bytes(desired).finish()); });
  }

  std::vector<std::string> missing(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    for (const auto& k : keys)
      if (!data.count(k)) out.push_back(k);
    return out;
  }

  // Answers the parked WAITs that are satisfied or expired. Serving a released
  // connection's queued requests can set keys, so repeat until nothing moves.
  void settle_waits() {
    bool progress = true;
    while (progress) {
      progress = false;
      std::vector<ParkedWait> pending;
      pending.swap(waits);
      const auto now = Clock::now();
      for (auto& w : pending) {
        Connection& c = connections.at(w.fd);
        std::vector<std::string> absent;
        {
          std::lock_guard<std::mutex> lock(data_mutex);
          absent = missing(w.keys);
        }
        if (c.dead || (!absent.empty() && (!w.deadline || now < *w.deadline))) {
          waits.push_back(std::move(w));
          continue;
        }
        if (absent.empty()) {
          reply(c, ok().finish());
        } else {
          reply(c, proto::Encoder(static_cast<uint8_t>(proto::Status::kTimedOut))
                       .keys(absent)
                       .finish());
        }
        c.parked = false;
        serve(c);
        progress = true;
      }
    }
  }

  void drop_dead() {
    for (auto it = connections.begin(); it != connections.end();) {
      if (!it->second.dead) {
        ++it;
        continue;
      }
      const int fd = it->first;
      waits.erase(std::remove_if(waits.begin(), waits.end(),
                                 [fd](const ParkedWait& w) { return w.fd == fd; }),
                  waits.end());
      it = connections.erase(it);
    }
  }

  const std::string token;
  const StoreLimits limits;
  Fd listener;
  Fd wake;  // written by the destructor to end poll() at once
  uint16_t port;
  uint64_t accepted_count = 0;
  size_t stored_bytes = 0;     // keys and values in `data`
  Clock::time_point accept_paused_until{};
  mutable std::mutex data_mutex;  // data is read by peek() from other threads
  std::unordered_map<std::string, std::string> data;
  std::unordered_map<int, Connection> connections;  // keyed by socket fd
  std::vector<ParkedWait> waits;
  std::thread thread;
};

StoreServer::StoreServer(const std::string& host, uint16_t port, std::string token,
                         StoreLimits limits)
    : impl_(std::make_unique<Impl>(host, port, std::move(token), limits)) {}

StoreServer::~StoreServer() = default;

uint16_t StoreServer::port() const { return impl_->port; }

std::optional<std::string> StoreServer::peek(const std::string& key) const {
  std::lock_guard<std::mutex> lock(impl_->data_mutex);
  const auto it = impl_->data.find(key);
  if (it == impl_->data.end()) return std::nullopt;
  return it->second;
}

}  // namespace accel
