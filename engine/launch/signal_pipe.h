// How signals reach the supervisor's poll() loop: a self-pipe. A handler
// may run on any thread (the store server has its own), so it only writes
// the signal number to a pipe that the loop watches. One SignalPipe at a
// time per process (supervise() runs once at a time); it sets the
// launcher's dispositions while it lives and restores them after.
#pragma once
#include <signal.h>

#include <array>
#include <vector>

namespace accel {

class SignalPipe {
 public:
  SignalPipe();
  ~SignalPipe();
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  int fd() const { return read_fd_; }

  // The signals received since the last call, oldest first.
  std::vector<int> drain() const;

  // For a forked child about to exec: the dispositions a worker starts with.
  // Async-signal-safe.
  void set_for_child() const noexcept {
    for (size_t i = 0; i < kManaged.size(); ++i) ::sigaction(kManaged[i], &for_child_[i], nullptr);
  }

 private:
  static constexpr std::array<int, 5> kManaged = {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGPIPE};

  int read_fd_ = -1;
  int write_fd_ = -1;
  struct sigaction saved_[kManaged.size()] {};
  struct sigaction for_child_[kManaged.size()] {};
};

}  // namespace accel
