#include "engine/store_client.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>

#include "engine/launch/store_protocol.h"

namespace accel {
namespace {

namespace proto = store_protocol;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string as_string(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }
std::vector<uint8_t> as_bytes(const std::string& s) { return {s.begin(), s.end()}; }

proto::Encoder make_request(proto::Command c) {
  return proto::Encoder(static_cast<uint8_t>(c));
}

std::string join(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "" : ", ") + k;
  return out;
}

// Milliseconds left until `deadline`, at least 1 so it never reads as "no limit".
milliseconds remaining(std::optional<Clock::time_point> deadline) {
  if (!deadline) return c10d::Store::kNoTimeout;
  const auto left = std::chrono::ceil<milliseconds>(*deadline - Clock::now());
  return std::max(left, milliseconds(1));
}

// Reads the status byte; an Error reply becomes an exception naming the store.
proto::Status status_of(proto::Decoder& d, const std::string& where) {
  const auto status = static_cast<proto::Status>(d.u8());
  if (status == proto::Status::kError)
    throw std::runtime_error("rendezvous store at " + where + ": " + d.bytes());
  return status;
}

std::runtime_error timed_out(const std::string& where, milliseconds timeout,
                             const std::vector<std::string>& keys) {
  return std::runtime_error("rendezvous store at " + where + ": timed out after " +
                            std::to_string(timeout.count()) +
                            " ms waiting for keys: " + join(keys));
}

// Waits for a non-blocking connect to finish; returns 0 or the errno.
int finish_connect(int fd, milliseconds limit) {
  pollfd p{fd, POLLOUT, 0};
  const int timeout = limit == c10d::Store::kNoTimeout
                          ? -1
                          : static_cast<int>(std::min<int64_t>(limit.count(), INT_MAX));
  int rc;
  while ((rc = ::poll(&p, 1, timeout)) < 0 && errno == EINTR) {
  }
  if (rc < 0) return errno;
  if (rc == 0) return ETIMEDOUT;
  int err = 0;
  socklen_t len = sizeof err;
  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  return err;
}

// One attempt on every address of host:port. The connect itself is bounded by
// `limit`: a SYN to a host that is down would otherwise hang for minutes.
// Returns a blocking socket, or -1 with `error` set.
int try_connect(const std::string& host, uint16_t port, milliseconds limit,
                std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) {
    error = ::gai_strerror(rc);
    return -1;
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(found, ::freeaddrinfo);
  for (const addrinfo* ai = found; ai; ai = ai->ai_next) {
    // CLOEXEC: a worker may spawn subprocesses, which must not hold the store.
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                            ai->ai_protocol);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    int err = ::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 ? 0 : errno;
    if (err == EINPROGRESS) err = finish_connect(fd, limit);
    if (err == 0) {
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return fd;
    }
    error = std::strerror(err);
    ::close(fd);
  }
  return -1;
}

}  // namespace

StoreClient::StoreClient(const std::string& host, uint16_t port, milliseconds timeout)
    : c10d::Store(timeout), host_(host), port_(port) {
  const auto deadline = proto::deadline_after(timeout.count());
  std::string error;
  for (;;) {
    fd_ = try_connect(host_, port_, remaining(deadline), error);
    if (fd_ >= 0) return;
    if (deadline && Clock::now() >= *deadline)
      throw std::runtime_error("cannot connect to the rendezvous store at " + where() +
                               " within " + std::to_string(timeout.count()) +
                               " ms: " + error);
    const milliseconds pause(50);
    std::this_thread::sleep_for(deadline ? std::min(pause, remaining(deadline)) : pause);
  }
}

StoreClient::~StoreClient() { ::close(fd_); }

std::string StoreClient::where() const { return host_ + ":" + std::to_string(port_); }

std::string StoreClient::request(const std::string& frame) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto lost = [this](const std::string& why) {
    // The stream may now be mid-frame; shut it so every later call fails too
    // instead of reading a stale reply.
    ::shutdown(fd_, SHUT_RDWR);
    return std::runtime_error("lost connection to the rendezvous store at " + where() +
                              ": " + why);
  };
  for (size_t sent = 0; sent < frame.size();) {
    const ssize_t n = ::send(fd_, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw lost(std::strerror(errno));
    sent += static_cast<size_t>(n);
  }
  const auto receive = [&](std::string& buf) {
    for (size_t got = 0; got < buf.size();) {
      const ssize_t n = ::recv(fd_, buf.data() + got, buf.size() - got, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw lost(std::strerror(errno));
      if (n == 0) throw lost("closed by the store");
      got += static_cast<size_t>(n);
    }
  };
  std::string header(proto::kFrameHeaderBytes, '\0');
  receive(header);
  std::string body;
  try {
    body.resize(*proto::frame_body_length(header));
  } catch (const proto::ProtocolError& e) {
    throw lost(e.what());
  }
  receive(body);
  return body;
}

void StoreClient::set(const std::string& key, const std::vector<uint8_t>& value) {
  const std::string body =
      request(make_request(proto::Command::kSet).bytes(key).bytes(as_string(value)).finish());
  proto::Decoder d(body);
  status_of(d, where());
}

std::vector<uint8_t> StoreClient::compareSet(const std::string& key,
                                             const std::vector<uint8_t>& expected,
                                             const std::vector<uint8_t>& desired) {
  const std::string body = request(make_request(proto::Command::kCompareSet)
                                       .bytes(key)
                                       .bytes(as_string(expected))
                                       .bytes(as_string(desired))
                                       .finish());
  proto::Decoder d(body);
  status_of(d, where());
  return as_bytes(d.bytes());
}

std::vector<uint8_t> StoreClient::get(const std::string& key) {
  const auto deadline = proto::deadline_after(timeout_.count());
  for (;;) {
    const auto absent = wait_for({key}, remaining(deadline));
    if (!absent.empty()) throw timed_out(where(), timeout_, absent);
    const std::string body = request(make_request(proto::Command::kGet).bytes(key).finish());
    proto::Decoder d(body);
    // NotFound: deleted between the wait and the get; wait for it again.
    if (status_of(d, where()) == proto::Status::kOk) return as_bytes(d.bytes());
  }
}

int64_t StoreClient::add(const std::string& key, int64_t value) {
  const std::string body =
      request(make_request(proto::Command::kAdd).bytes(key).i64(value).finish());
  proto::Decoder d(body);
  status_of(d, where());
  return d.i64();
}

bool StoreClient::deleteKey(const std::string& key) {
  const std::string body = request(make_request(proto::Command::kDelete).bytes(key).finish());
  proto::Decoder d(body);
  status_of(d, where());
  return d.u8() != 0;
}

bool StoreClient::check(const std::vector<std::string>& keys) {
  const std::string body = request(make_request(proto::Command::kCheck).keys(keys).finish());
  proto::Decoder d(body);
  status_of(d, where());
  return d.u8() != 0;
}

int64_t StoreClient::getNumKeys() {
  const std::string body = request(make_request(proto::Command::kNumKeys).finish());
  proto::Decoder d(body);
  status_of(d, where());
  return d.i64();
}

void StoreClient::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void StoreClient::wait(const std::vector<std::string>& keys, const milliseconds& timeout) {
  const auto absent = wait_for(keys, timeout);
  if (!absent.empty()) throw timed_out(where(), timeout, absent);
}

std::vector<std::string> StoreClient::wait_for(const std::vector<std::string>& keys,
                                               milliseconds timeout) {
  const std::string body = request(
      make_request(proto::Command::kWait).i64(timeout.count()).keys(keys).finish());
  proto::Decoder d(body);
  if (status_of(d, where()) == proto::Status::kTimedOut) return d.keys();
  return {};
}

c10::intrusive_ptr<c10d::Store> StoreClient::clone() {
  return c10::make_intrusive<StoreClient>(host_, port_, timeout_);
}

}  // namespace accel
