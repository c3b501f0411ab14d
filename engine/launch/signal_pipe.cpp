#include "engine/launch/signal_pipe.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <stdexcept>

#include "engine/launch/errno_error.h"

namespace accel {
namespace {

std::atomic<int> g_signal_pipe{-1};
std::atomic<bool> g_supervising{false};

void on_signal(int signal) {
  int saved = errno;
  auto byte = static_cast<unsigned char>(signal);
  // Fails only when the pipe holds 64 KiB of unread signals, which are
  // wake-ups enough.
  [[maybe_unused]] ssize_t written = ::write(g_signal_pipe.load(), &byte, 1);
  errno = saved;
}

}  // namespace

SignalPipe::SignalPipe() {
  if (g_supervising.exchange(true)) {
    throw std::logic_error("supervise() is already running in this process");
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    g_supervising = false;
    throw_errno("cannot create the launcher's signal pipe");
  }
  read_fd_ = fds[0];
  write_fd_ = fds[1];
  g_signal_pipe = write_fd_;

  struct sigaction handle {};
  handle.sa_handler = on_signal;
  sigfillset(&handle.sa_mask);
  handle.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  struct sigaction by_default {};
  by_default.sa_handler = SIG_DFL;
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  for (size_t i = 0; i < kManaged.size(); ++i) {
    int signal = kManaged[i];
    ::sigaction(signal, nullptr, &saved_[i]);
    for_child_[i] = saved_[i];  // a handler becomes the default at exec
    if (signal == SIGCHLD) {
      ::sigaction(signal, &handle, nullptr);
      for_child_[i] = by_default;  // workers may wait for children of their own
    } else if (signal == SIGPIPE) {
      // A reader of the launcher's output going away must not kill the run.
      ::sigaction(signal, &ignore, nullptr);
    } else if (saved_[i].sa_handler != SIG_IGN) {
      // A stop signal the launcher was started ignoring (nohup's SIGHUP, a
      // shell's SIGINT for background jobs) stays ignored, in workers too.
      ::sigaction(signal, &handle, nullptr);
    }
  }
}

SignalPipe::~SignalPipe() {
  for (size_t i = 0; i < kManaged.size(); ++i) ::sigaction(kManaged[i], &saved_[i], nullptr);
  g_signal_pipe = -1;
  ::close(read_fd_);
  ::close(write_fd_);
  g_supervising = false;
}

std::vector<int> SignalPipe::drain() const {
  std::vector<int> received;
  unsigned char bytes[64];
  ssize_t n;
  while ((n = ::read(read_fd_, bytes, sizeof(bytes))) > 0 || (n < 0 && errno == EINTR)) {
    received.insert(received.end(), bytes, bytes + std::max<ssize_t>(n, 0));
  }
  return received;
}

}  // namespace accel
