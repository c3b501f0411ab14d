#include "engine/launch/worker_exec.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>

#include "engine/launch/errno_error.h"
#include "engine/launch/signal_pipe.h"
#include "engine/protocol/warm_protocol.h"

namespace accel {
namespace {

// Makes `from` available as `to` in the exec'd program.
bool move_fd(int from, int to) {
  if (from == to) return ::fcntl(to, F_SETFD, 0) == 0;  // only clear close-on-exec
  return ::dup2(from, to) == to;
}

}  // namespace

void exec_worker(const ChildPlan& plan) noexcept {
  // Die with the launcher, and make sure it did not die before this took effect.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != plan.launcher) ::_exit(1);
  // A session of its own: its own process group, for signalling what it
  // starts, and no controlling terminal, so job control never stops it
  // (a background group reading the terminal would get SIGTTIN).
  ::setsid();
  if (move_fd(plan.stdin_fd, STDIN_FILENO) && move_fd(plan.stdout_fd, STDOUT_FILENO) &&
      move_fd(plan.stderr_fd, STDERR_FILENO) &&
      (plan.control_fd < 0 || move_fd(plan.control_fd, kControlFd))) {
    plan.signals->set_for_child();
    ::pthread_sigmask(SIG_SETMASK, plan.mask, nullptr);
    ::execve(plan.program, plan.argv, plan.envp);
  }
  int error = errno;
  [[maybe_unused]] ssize_t written = ::write(plan.status_fd, &error, sizeof(error));
  ::_exit(127);
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> result;
  for (std::string& s : strings) result.push_back(s.data());
  result.push_back(nullptr);
  return result;
}

Pipe::Pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw_errno("cannot create a pipe for a worker");
  read = fds[0];
  write = fds[1];
}

Pipe::~Pipe() {
  for (int fd : {read, write}) {
    if (fd >= 0) ::close(fd);
  }
}

void signal_worker(pid_t pid, int signal) {
  // No such group: the worker has not reached setsid() yet, or left the group.
  if (::kill(-pid, signal) != 0) ::kill(pid, signal);
}

}  // namespace accel
