#include "engine/launch/output_relay.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
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
// How long a full output stream may hold up the launcher before a line is dropped.
constexpr int kWriteTimeoutMs = 1000;

}  // namespace

void write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n >= 0) {
      done += static_cast<size_t>(n);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      pollfd waiting{fd, POLLOUT, 0};
      int ready = ::poll(&waiting, 1, kWriteTimeoutMs);
      if (ready == 0 || (ready < 0 && errno != EINTR)) return;  // stuck: the line is dropped
    } else if (errno != EINTR) {
      return;  // the reader went away: the workers keep running, their output is lost
    }
  }
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
      pending_(std::move(other.pending_)) {}

void OutputRelay::pump() {
  char buffer[16384];
  size_t taken = 0;
  while (pipe_fd_ >= 0 && taken < kMaxPerPump) {
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
        write_line(begin, newline);
      } else {
        pending_.append(begin, newline);
        write_line(pending_.data(), pending_.data() + pending_.size());
        pending_.clear();
      }
      begin = newline + 1;
    }
    pending_.append(begin, end);
    if (pending_.size() >= kMaxLine) {
      write_line(pending_.data(), pending_.data() + pending_.size());
      pending_.clear();
    }
  }
}

void OutputRelay::finish() {
  // The worker is gone, so what the pipe holds now is its last output; a
  // descendant that outlived it and keeps writing is not waited for.
  for (int round = 0; round < kMaxFinishPumps && pipe_fd_ >= 0; ++round) {
    pollfd readable{pipe_fd_, POLLIN, 0};
    if (::poll(&readable, 1, 0) <= 0) break;
    pump();
  }
  close_pipe();
  if (!pending_.empty()) {
    write_line(pending_.data(), pending_.data() + pending_.size());
    pending_.clear();
  }
}

void OutputRelay::write_line(const char* begin, const char* end) {
  std::string line;
  line.reserve(prefix_.size() + static_cast<size_t>(end - begin) + 1);
  line.append(prefix_).append(begin, end).push_back('\n');
  write_all(out_fd_, line);
  if (log_fd_ >= 0) write_all(log_fd_, line.substr(prefix_.size()));
}

void OutputRelay::close_pipe() {
  if (pipe_fd_ >= 0) ::close(pipe_fd_);
  pipe_fd_ = -1;
}

}  // namespace accel
