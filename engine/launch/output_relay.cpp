#include "engine/launch/output_relay.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <utility>

namespace accel {
namespace {

// A line longer than this is relayed in pieces, so a worker that never writes
// a newline cannot grow the launcher's memory without bound.
constexpr size_t kMaxLine = 64 * 1024;
// Reading stops after this much per pump() so one chatty rank cannot starve
// the other pipes and the launcher's signal handling.
constexpr size_t kMaxPerPump = 1024 * 1024;
// finish() reads at most this many pumps' worth of leftovers.
constexpr int kMaxFinishPumps = 16;

// Writes what `fd` takes now of `data` and returns how much that was: all
// of it when the reader has gone (the rest is dropped). Each write() is at
// most PIPE_BUF bytes and ends at a line's end when the piece has one: a
// pipe with room takes that much whole without blocking, even when the
// launcher's stream is a blocking file description it shares.
size_t write_now(int fd, const char* data, size_t size) {
  size_t done = 0;
  while (done < size) {
    pollfd room{fd, POLLOUT, 0};
    const int ready = ::poll(&room, 1, 0);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;
    if (!(room.revents & POLLOUT)) return size;  // POLLERR, POLLHUP: nobody reads any more
    size_t piece = std::min<size_t>(size - done, PIPE_BUF);
    if (piece < size - done) {
      if (const void* newline = ::memrchr(data + done, '\n', piece)) {
        piece = static_cast<size_t>(static_cast<const char*>(newline) - (data + done)) + 1;
      }
    }
    const ssize_t n = ::write(fd, data + done, piece);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 || errno == EAGAIN || errno == EWOULDBLOCK) break;  // full after all
    return size;  // EPIPE and the like: the workers keep running, this output is lost
  }
  return done;
}

// Waits until `fd` has room or `deadline` passes; false at the deadline.
bool wait_for_room(int fd, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd room{fd, POLLOUT, 0};
    const int ready = ::poll(&room, 1, static_cast<int>(left.count()));
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return false;
  }
}

// write_all with an absolute deadline; returns the bytes dropped.
size_t write_until(int fd, const std::string& data, std::chrono::steady_clock::time_point deadline) {
  size_t done = 0;
  while ((done += write_now(fd, data.data() + done, data.size() - done)) < data.size()) {
    if (!wait_for_room(fd, deadline)) return data.size() - done;
  }
  return 0;
}

}  // namespace

void write_all(int fd, const std::string& data) {
  write_until(fd, data, std::chrono::steady_clock::now() + std::chrono::seconds(1));
}

OutputRelay::OutputRelay(int pipe_fd, int out_fd, std::string prefix, int log_fd)
    : pipe_fd_(pipe_fd), out_fd_(out_fd), log_fd_(log_fd), prefix_(std::move(prefix)) {
  ::fcntl(pipe_fd_, F_SETFL, ::fcntl(pipe_fd_, F_GETFL) | O_NONBLOCK);
}

OutputRelay::~OutputRelay() { close_pipe(); }

OutputRelay::OutputRelay(OutputRelay&& other) noexcept
    : pipe_fd_(std::exchange(other.pipe_fd_, -1)),
      out_fd_(other.out_fd_),
      log_fd_(other.log_fd_),
      prefix_(std::move(other.prefix_)),
      pending_(std::move(other.pending_)),
      unsent_(std::move(other.unsent_)) {}

void OutputRelay::pump() {
  char buffer[16384];
  size_t taken = 0;
  while (pipe_fd_ >= 0 && taken < kMaxPerPump && unsent_.size() < kMaxUnsent) {
    ssize_t n = ::read(pipe_fd_, buffer, sizeof(buffer));
    if (n == 0) {
      close_pipe();
      break;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) close_pipe();
      break;
    }
    taken += static_cast<size_t>(n);
    const char* begin = buffer;
    const char* end = buffer + n;
    while (const char* newline = static_cast<const char*>(std::memchr(begin, '\n', end - begin))) {
      if (pending_.empty()) {
        queue_line(begin, newline);
      } else {
        pending_.append(begin, newline);
        queue_line(pending_.data(), pending_.data() + pending_.size());
        pending_.clear();
      }
      begin = newline + 1;
    }
    pending_.append(begin, end);
    if (pending_.size() >= kMaxLine) {
      queue_line(pending_.data(), pending_.data() + pending_.size());
      pending_.clear();
    }
  }
  send();
}

void OutputRelay::send() {
  if (unsent_.empty()) return;
  unsent_.erase(0, write_now(out_fd_, unsent_.data(), unsent_.size()));
}

size_t OutputRelay::finish(std::chrono::steady_clock::time_point deadline) {
  // The worker is gone, so what the pipe holds now is its last output; a
  // descendant that outlived it and keeps writing is not waited for.
  size_t dropped = 0;
  for (int round = 0; round < kMaxFinishPumps && pipe_fd_ >= 0; ++round) {
    dropped += write_until(out_fd_, unsent_, deadline);
    unsent_.clear();
    pollfd readable{pipe_fd_, POLLIN, 0};
    if (::poll(&readable, 1, 0) <= 0) break;
    pump();
  }
  close_pipe();
  if (!pending_.empty()) {
    queue_line(pending_.data(), pending_.data() + pending_.size());
    pending_.clear();
  }
  dropped += write_until(out_fd_, unsent_, deadline);
  unsent_.clear();
  return dropped;
}

void OutputRelay::queue_line(const char* begin, const char* end) {
  unsent_.append(prefix_).append(begin, end).push_back('\n');
  if (log_fd_ >= 0) {
    std::string line(begin, end);
    line.push_back('\n');
    write_all(log_fd_, line);
  }
}

void OutputRelay::close_pipe() {
  if (pipe_fd_ >= 0) ::close(pipe_fd_);
  pipe_fd_ = -1;
}

}  // namespace accel
