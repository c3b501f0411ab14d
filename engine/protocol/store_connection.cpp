#include "engine/protocol/store_connection.h"

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
#include <sstream>
#include <memory>
#include <thread>

#include "engine/protocol/store_protocol.h"

namespace accel {
namespace {

namespace proto = store_protocol;
using Clock = StoreConnection::Clock;
using std::chrono::milliseconds;

proto::Encoder make_request(proto::Command c) { return proto::Encoder(static_cast<uint8_t>(c)); }

// Milliseconds until `deadline` for poll(): -1 (forever) without one.
int poll_ms(std::optional<Clock::time_point> deadline) {
  if (!deadline) return -1;
  auto left = std::chrono::ceil<milliseconds>(*deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, INT_MAX));
}

// One attempt on every address of host:port, each connect bounded by the
// deadline; a non-blocking socket (request() polls with deadlines), or -1
// with `error` set.
int try_connect(const StoreAddress& address, std::optional<Clock::time_point> deadline,
                std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  int rc = ::getaddrinfo(address.host.c_str(), std::to_string(address.port).c_str(), &hints, &found);
  if (rc != 0) {
    error = ::gai_strerror(rc);
    return -1;
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(found, ::freeaddrinfo);
  for (const addrinfo* ai = found; ai; ai = ai->ai_next) {
    // CLOEXEC: launchers fork workers and workers may start programs; none
    // of them may hold this connection.
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                      ai->ai_protocol);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    int err = ::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      // A SYN to a host that is down would otherwise hang for minutes.
      pollfd p{fd, POLLOUT, 0};
      int ready;
      const int limit = deadline ? std::max(poll_ms(deadline), 100) : -1;
      while ((ready = ::poll(&p, 1, limit)) < 0 && errno == EINTR) {
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
      return fd;
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

StoreConnection::StoreConnection(StoreAddress address, std::optional<Clock::time_point> deadline,
                                 std::optional<milliseconds> reply_timeout)
    : address_(std::move(address)), reply_timeout_(reply_timeout) {
  std::string error = "no attempt made";
  for (;;) {
    fd_ = try_connect(address_, deadline, error);
    if (fd_ >= 0) break;
    if (deadline && Clock::now() >= *deadline) {
      throw StoreUnreachable("cannot reach the rendezvous store at " + address_.where() + ": " +
                             error);
    }
    const milliseconds pause(100);
    std::this_thread::sleep_for(deadline ? std::min(pause, milliseconds(poll_ms(deadline))) : pause);
  }
  try {
    ask(make_request(proto::Command::kHello).bytes(address_.token).finish());
  } catch (const StoreNoAnswer&) {
    // Connected by the kernel, never taken by the store: its places were
    // full (the store says more itself when it refuses).
    ::close(fd_);
    std::ostringstream within;
    within << (reply_timeout_ ? static_cast<double>(reply_timeout_->count()) / 1000 : 0.0);
    throw StoreUnreachable("the rendezvous store at " + address_.where() + " accepted no connection within " +
                           within.str() + " s");
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

StoreConnection::~StoreConnection() { ::close(fd_); }

std::string StoreConnection::request(const std::string& frame,
                                     std::optional<Clock::time_point> deadline) {
  auto lost = [this](const std::string& why) {
    // The stream may be mid-frame now: shut it so later calls fail as well.
    ::shutdown(fd_, SHUT_RDWR);
    return StoreUnreachable("lost the rendezvous store at " + address_.where() + ": " + why);
  };
  auto unanswered = [this] {
    ::shutdown(fd_, SHUT_RDWR);
    return StoreNoAnswer("lost the rendezvous store at " + address_.where() + ": no answer in time");
  };
  auto await = [&](short events) {
    pollfd p{fd_, events, 0};
    int ready;
    while ((ready = ::poll(&p, 1, poll_ms(deadline))) < 0 && errno == EINTR) {
    }
    if (ready == 0) throw unanswered();
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

std::string StoreConnection::ask(const std::string& frame) {
  std::optional<Clock::time_point> deadline;
  if (reply_timeout_) deadline = Clock::now() + *reply_timeout_;
  std::string body = request(frame, deadline);
  proto::Decoder d(body);
  status_of(d, address_.where());
  return body;
}

void StoreConnection::set(const std::string& key, const std::string& value) {
  ask(make_request(proto::Command::kSet).bytes(key).bytes(value).finish());
}

std::optional<std::string> StoreConnection::get(const std::string& key) {
  std::string body = ask(make_request(proto::Command::kGet).bytes(key).finish());
  proto::Decoder d(body);
  if (static_cast<proto::Status>(d.u8()) == proto::Status::kNotFound) return std::nullopt;
  return d.bytes();
}

int64_t StoreConnection::add(const std::string& key, int64_t delta) {
  std::string body = ask(make_request(proto::Command::kAdd).bytes(key).i64(delta).finish());
  proto::Decoder d(body);
  d.u8();
  return d.i64();
}

std::string StoreConnection::compare_set(const std::string& key, const std::string& expected,
                                         const std::string& desired) {
  std::string body = ask(
      make_request(proto::Command::kCompareSet).bytes(key).bytes(expected).bytes(desired).finish());
  proto::Decoder d(body);
  d.u8();
  return d.bytes();
}

bool StoreConnection::remove(const std::string& key) {
  std::string body = ask(make_request(proto::Command::kDelete).bytes(key).finish());
  proto::Decoder d(body);
  d.u8();
  return d.u8() != 0;
}

bool StoreConnection::check(const std::vector<std::string>& keys) {
  std::string body = ask(make_request(proto::Command::kCheck).keys(keys).finish());
  proto::Decoder d(body);
  d.u8();
  return d.u8() != 0;
}

int64_t StoreConnection::num_keys() {
  std::string body = ask(make_request(proto::Command::kNumKeys).finish());
  proto::Decoder d(body);
  d.u8();
  return d.i64();
}

std::vector<std::string> StoreConnection::wait(const std::vector<std::string>& keys,
                                               std::optional<milliseconds> timeout) {
  // The store answers at the timeout (a timeout of 0 would mean "forever"
  // to it), so the reply may take that long, and a little more.
  const int64_t ms = timeout ? std::max<int64_t>(timeout->count(), 1) : 0;
  std::optional<Clock::time_point> deadline;
  if (timeout) deadline = Clock::now() + milliseconds(ms) + kReplyTimeout;
  std::string body =
      request(make_request(proto::Command::kWait).i64(ms).keys(keys).finish(), deadline);
  proto::Decoder d(body);
  if (status_of(d, address_.where()) == proto::Status::kTimedOut) return d.keys();
  return {};
}

}  // namespace accel
