#include "engine/launch/store_connection.h"

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
#include <thread>

#include "engine/launch/store_protocol.h"

namespace accel {
namespace {

namespace proto = store_protocol;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How long the store may take to answer a request that does not wait: it
// answers at once unless its host is in trouble, which must not hang us.
constexpr int64_t kReplyTimeoutMs = 10000;

proto::Encoder make_request(proto::Command c) { return proto::Encoder(static_cast<uint8_t>(c)); }

int poll_ms(Clock::time_point deadline) {
  auto left = std::chrono::ceil<milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, INT_MAX));
}

// One attempt on every address of host:port, each connect bounded by the
// deadline; a blocking socket, or -1 with `error` set.
int try_connect(const std::string& host, uint16_t port, Clock::time_point deadline,
                std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) {
    error = ::gai_strerror(rc);
    return -1;
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(found, ::freeaddrinfo);
  for (const addrinfo* ai = found; ai; ai = ai->ai_next) {
    // CLOEXEC: the launcher forks workers, which must not hold its connection.
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                      ai->ai_protocol);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    int err = ::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int ready;
      while ((ready = ::poll(&p, 1, std::max(poll_ms(deadline), 100))) < 0 && errno == EINTR) {
      }
      socklen_t len = sizeof err;
      if (ready <= 0) {
        err = ready == 0 ? ETIMEDOUT : errno;
      } else {
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      }
    }
    if (err == 0) {
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return fd;  // stays non-blocking: request() polls with deadlines
    }
    error = std::strerror(err);
    ::close(fd);
  }
  return -1;
}

proto::Status status_of(proto::Decoder& d, const std::string& where) {
  auto status = static_cast<proto::Status>(d.u8());
  if (status == proto::Status::kError) {
    throw std::runtime_error("rendezvous store at " + where + ": " + d.bytes());
  }
  return status;
}

}  // namespace

StoreConnection::StoreConnection(const std::string& host, uint16_t port,
                                 Clock::time_point deadline)
    : host_(host), port_(port) {
  std::string error = "no attempt made";
  for (;;) {
    fd_ = try_connect(host_, port_, deadline, error);
    if (fd_ >= 0) return;
    if (Clock::now() >= deadline) {
      throw StoreUnreachable("cannot reach the rendezvous store at " + where() + ": " + error);
    }
    std::this_thread::sleep_for(std::min(milliseconds(100), milliseconds(poll_ms(deadline))));
  }
}

StoreConnection::~StoreConnection() { ::close(fd_); }

std::string StoreConnection::where() const { return host_ + ":" + std::to_string(port_); }

std::string StoreConnection::request(const std::string& frame,
                                     std::optional<int64_t> reply_timeout_ms) {
  auto deadline = Clock::now() + milliseconds(reply_timeout_ms.value_or(kReplyTimeoutMs));
  auto lost = [this](const std::string& why) {
    // The stream may be mid-frame now: shut it so later calls fail as well.
    ::shutdown(fd_, SHUT_RDWR);
    return StoreUnreachable("lost the rendezvous store at " + where() + ": " + why);
  };
  auto await = [&](short events) {
    pollfd p{fd_, events, 0};
    int ready;
    while ((ready = ::poll(&p, 1, poll_ms(deadline))) < 0 && errno == EINTR) {
    }
    if (ready == 0) throw lost("no answer in time");
    if (ready < 0) throw lost(std::strerror(errno));
  };
  for (size_t sent = 0; sent < frame.size();) {
    ssize_t n = ::send(fd_, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
    if (n >= 0) {
      sent += static_cast<size_t>(n);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      await(POLLOUT);
    } else if (errno != EINTR) {
      throw lost(std::strerror(errno));
    }
  }
  auto receive = [&](std::string& buf) {
    for (size_t got = 0; got < buf.size();) {
      ssize_t n = ::recv(fd_, buf.data() + got, buf.size() - got, 0);
      if (n > 0) {
        got += static_cast<size_t>(n);
      } else if (n == 0) {
        throw lost("closed by the store");
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        await(POLLIN);
      } else if (errno != EINTR) {
        throw lost(std::strerror(errno));
      }
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
  if (body.empty()) throw lost("empty reply");
  return body;
}

void StoreConnection::set(const std::string& key, const std::string& value) {
  std::string body =
      request(make_request(proto::Command::kSet).bytes(key).bytes(value).finish(), {});
  proto::Decoder d(body);
  status_of(d, where());
}

std::optional<std::string> StoreConnection::get(const std::string& key) {
  std::string body = request(make_request(proto::Command::kGet).bytes(key).finish(), {});
  proto::Decoder d(body);
  if (status_of(d, where()) == proto::Status::kNotFound) return std::nullopt;
  return d.bytes();
}

int64_t StoreConnection::add(const std::string& key, int64_t delta) {
  std::string body = request(make_request(proto::Command::kAdd).bytes(key).i64(delta).finish(), {});
  proto::Decoder d(body);
  status_of(d, where());
  return d.i64();
}

std::vector<std::string> StoreConnection::wait(const std::vector<std::string>& keys,
                                               milliseconds timeout) {
  // The store answers at the timeout; a timeout of 0 would mean "forever".
  int64_t ms = std::max<int64_t>(timeout.count(), 1);
  std::string body = request(
      make_request(proto::Command::kWait).i64(ms).keys(keys).finish(), ms + kReplyTimeoutMs);
  proto::Decoder d(body);
  if (status_of(d, where()) == proto::Status::kTimedOut) return d.keys();
  return {};
}

}  // namespace accel
