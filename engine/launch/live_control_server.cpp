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

#include "engine/launch/control_socket.h"
#include "engine/launch/errno_error.h"
#include "engine/protocol/warm_protocol.h"

namespace accel {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kHelloTimeout{5000};
constexpr size_t kMaxConnections = 32;

std::string trimmed(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

}  // namespace

LiveControlServer::LiveControlServer(std::string socket_path, StoreAddress store, int world_size,
                                     std::vector<std::string> logs, int run)
    : socket_path_(std::move(socket_path)), store_(std::move(store)), world_size_(world_size), run_(run), keys_(run) {
  {
    StoreConnection connection(store_, std::chrono::steady_clock::now() + milliseconds(5000));
    std::string files;
    for (const std::string& log : logs) files += log + "\n";
    connection.set(keys_.logs(), files);
    connection.set(live_keys::kRun, std::to_string(run_));
  }
  listen_fd_ = listen_owner_only(socket_path_);
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
  try {
    StoreConnection connection(store_, std::chrono::steady_clock::now() + milliseconds(2000));
    if (connection.get(live_keys::kRun) == std::to_string(run_)) connection.set(live_keys::kRun, "");
  } catch (const std::exception&) {
    // The store is gone with the workers: no run can take chunks from it.
  }
}

void LiveControlServer::accept_loop() {
  while (readable(listen_fd_, wake_fd_, -1)) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    if (!peer_is_owner(fd)) {
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
  if (!accept_hello(fd, wake_fd_, store_.token, kHelloTimeout)) return;
  WarmFrameReader reader;
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
    const std::optional<std::string> line = store.get(keys_.status(rank));
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
    store.set(keys_.command(n), text);
    store.set(keys_.posted(), std::to_string(n));
  }
  std::vector<std::string> keys;
  for (int rank = 0; rank < world_size_; ++rank) keys.push_back(keys_.result(n, rank));
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
