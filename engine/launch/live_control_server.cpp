#include "engine/launch/live_control_server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include "engine/launch/errno_error.h"
#include "engine/protocol/live_control_keys.h"
#include "engine/protocol/warm_protocol.h"

namespace accel {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kHelloTimeout{5000};
constexpr size_t kMaxConnections = 32;

void send_all(int fd, const std::string& text) {
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// Compares without an early exit, so refusals take as long whatever the
// guess (as the store's HELLO does).
bool same_secret(const std::string& given, const std::string& secret) {
  unsigned char diff = given.size() == secret.size() ? 0 : 1;
  for (size_t i = 0; i < given.size(); ++i) {
    diff |= static_cast<unsigned char>(given[i] ^ secret[i % secret.size()]);
  }
  return diff == 0;
}

// Waits for `fd` or the wake eventfd; false when waking (or after `timeout`).
bool readable(int fd, int wake_fd, int timeout_ms) {
  pollfd fds[2] = {{fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
  int n;
  do {
    n = ::poll(fds, 2, timeout_ms);
  } while (n < 0 && errno == EINTR);
  return n > 0 && fds[1].revents == 0 && fds[0].revents != 0;
}

std::string trimmed(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

}  // namespace

LiveControlServer::LiveControlServer(std::string socket_path, StoreAddress store, int world_size,
                                     std::vector<std::string> logs)
    : socket_path_(std::move(socket_path)), store_(std::move(store)), world_size_(world_size) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (socket_path_.size() >= sizeof address.sun_path) {
    throw std::runtime_error("the control socket's path " + socket_path_ + " is too long for a Unix socket");
  }
  std::memcpy(address.sun_path, socket_path_.c_str(), socket_path_.size() + 1);
  {
    StoreConnection connection(store_, std::chrono::steady_clock::now() + milliseconds(5000));
    std::string files;
    for (const std::string& log : logs) files += log + "\n";
    connection.set(live_keys::kLogs, files);
    connection.set(live_keys::kOn, "1");
  }
  ::unlink(socket_path_.c_str());
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw_errno("cannot create the control socket");
  // Owner-only before anyone can connect: the umask decides the socket
  // file's mode at bind.
  const mode_t old_mask = ::umask(077);
  const int bound = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address);
  ::umask(old_mask);
  if (bound != 0 || ::chmod(socket_path_.c_str(), 0600) != 0 || ::listen(listen_fd_, 16) != 0) {
    const int error = errno;
    ::close(listen_fd_);
    errno = error;
    throw_errno("cannot listen on " + socket_path_);
  }
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    ::close(listen_fd_);
    throw_errno("cannot create an eventfd");
  }
  acceptor_ = std::thread([this] { accept_loop(); });
}

LiveControlServer::~LiveControlServer() {
  stopping_ = true;
  const uint64_t one = 1;
  if (::write(wake_fd_, &one, sizeof one) < 0) {
    // Nothing to do: the threads also see stopping_ at their next timeout.
  }
  acceptor_.join();
  {
    std::lock_guard<std::mutex> lock(threads_mutex_);
    for (Connection& connection : threads_) connection.thread.join();
  }
  ::close(listen_fd_);
  ::close(wake_fd_);
  ::unlink(socket_path_.c_str());
}

void LiveControlServer::accept_loop() {
  while (readable(listen_fd_, wake_fd_, -1)) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    ucred peer{};
    socklen_t size = sizeof peer;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0 || peer.uid != ::geteuid()) {
      send_all(fd, "refused: this run belongs to another user\n");
      ::close(fd);
      continue;
    }
    std::lock_guard<std::mutex> lock(threads_mutex_);
    // Connections that ended are joined as new ones come.
    for (size_t i = 0; i < threads_.size();) {
      if (*threads_[i].done) {
        threads_[i].thread.join();
        threads_.erase(threads_.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
    if (threads_.size() >= kMaxConnections) {
      send_all(fd, "refused: too many connections to this run\n");
      ::close(fd);
      continue;
    }
    auto done = std::make_shared<std::atomic<bool>>(false);
    threads_.push_back({std::thread([this, fd, done] {
                          serve(fd);
                          ::close(fd);
                          *done = true;
                        }),
                        done});
  }
}

void LiveControlServer::serve(int fd) {
  // The hello line: "hello <secret>\n", within kHelloTimeout.
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + kHelloTimeout;
  while (line.find('\n') == std::string::npos) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    char c[256];
    if (left.count() <= 0 || line.size() > 1024 || !readable(fd, wake_fd_, static_cast<int>(left.count()))) return;
    const ssize_t n = ::recv(fd, c, sizeof c, 0);
    if (n <= 0) return;
    line.append(c, static_cast<size_t>(n));
  }
  const size_t end = line.find('\n');
  const std::string hello = line.substr(0, end);
  if (hello.rfind("hello ", 0) != 0 || !same_secret(hello.substr(6), store_.token)) {
    send_all(fd, "refused: wrong secret (accel-run attach and ctl read it from the run's folder)\n");
    return;
  }
  send_all(fd, "ok\n");
  WarmFrameReader reader;
  reader.feed(line.data() + end + 1, line.size() - end - 1);
  try {
    StoreConnection store(store_, std::chrono::steady_clock::now() + milliseconds(5000));
    for (;;) {
      std::optional<WarmCommand> command;
      while (!(command = reader.next_command())) {
        char buffer[4096];
        if (!readable(fd, wake_fd_, -1)) return;
        const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
        if (n <= 0) return;
        reader.feed(buffer, static_cast<size_t>(n));
      }
      const Reply reply = handle(store, command->text);
      WarmMessage message;
      message.kind = reply.applied ? WarmMessage::Kind::ok : WarmMessage::Kind::failed;
      message.number = reply.step;
      message.text = reply.text;
      send_all(fd, encode_warm_message(message));
    }
  } catch (const std::exception& error) {
    WarmMessage message{WarmMessage::Kind::failed, -1, std::string("accel-run: ") + error.what() + "\n"};
    send_all(fd, encode_warm_message(message));
  }
}

LiveControlServer::Reply LiveControlServer::status(StoreConnection& store) {
  Reply reply{true, -1, ""};
  for (int rank = 0; rank < world_size_; ++rank) {
    const std::optional<std::string> line = store.get(live_keys::status(rank));
    reply.text += "[rank " + std::to_string(rank) + "] " + (line ? *line : "no step finished yet") + "\n";
  }
  return reply;
}

LiveControlServer::Reply LiveControlServer::handle(StoreConnection& store, const std::string& text) {
  if (trimmed(text) == "status") return status(store);
  int64_t n;
  {
    std::lock_guard<std::mutex> lock(post_mutex_);
    n = ++posted_;
    store.set(live_keys::command(n), text);
    store.set(live_keys::kPosted, std::to_string(n));
  }
  std::vector<std::string> keys;
  for (int rank = 0; rank < world_size_; ++rank) keys.push_back(live_keys::result(n, rank));
  // The ranks take it at their next step boundary, which may be far off
  // (a paused run, a long step): wait, a while at a time, until they do or
  // the run ends.
  while (!store.wait(keys, milliseconds(250)).empty()) {
    if (stopping_) return {false, -1, "accel-run: the run ended before every rank took the chunk\n"};
  }
  Reply reply{true, -1, ""};
  std::string failed;
  for (int rank = 0; rank < world_size_; ++rank) {
    const std::string value = store.get(keys[rank]).value_or("");
    const size_t space = value.find(' '), newline = value.find('\n');
    const std::string outcome = value.substr(0, space);
    if (space != std::string::npos) reply.step = std::atoll(value.c_str() + space + 1);
    const std::string said = newline == std::string::npos ? "" : value.substr(newline + 1);
    if (outcome != "applied") reply.applied = false;
    if (outcome == "failed") failed += (failed.empty() ? "" : ", ") + std::to_string(rank);
    if (!said.empty()) reply.text += "[rank " + std::to_string(rank) + "] " + said + (said.back() == '\n' ? "" : "\n");
  }
  const std::string where = "step " + std::to_string(reply.step);
  reply.text = (reply.applied ? "applied at " + where + "\n"
                              : "not applied, on any rank (at " + where + "): rank(s) " + failed + " failed\n") +
               reply.text;
  return reply;
}

}  // namespace accel
