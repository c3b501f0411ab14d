// Starting a worker: what the child does between fork and exec, and the
// pieces the supervisor prepares for it. The launcher may have threads (the
// store server), so the child calls only async-signal-safe functions:
// everything it needs is prepared before fork, in a ChildPlan.
#pragma once
#include <signal.h>
#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace accel {

class SignalPipe;

struct ChildPlan {
  const char* program;
  char* const* argv;
  char* const* envp;
  int stdin_fd;
  int stdout_fd;
  int stderr_fd;
  int status_fd;  // write end of the exec-status pipe: gets errno if exec fails
  int control_fd;  // becomes kControlFd; -1: none
  pid_t launcher;
  const SignalPipe* signals;
  const sigset_t* mask;  // the launcher's signal mask before fork blocked everything
};

// In the forked child: a session of its own, dying with the launcher, the
// descriptors and signal dispositions of the plan, then exec. If exec fails,
// errno goes to plan.status_fd and the child exits 127.
[[noreturn]] void exec_worker(const ChildPlan& plan) noexcept;

// argv/envp for exec: pointers into `strings`, null-terminated.
std::vector<char*> pointers(std::vector<std::string>& strings);

// A pipe whose ends close themselves; both ends are close-on-exec.
struct Pipe {
  int read = -1;
  int write = -1;
  Pipe();
  ~Pipe();
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  int release_read() { return std::exchange(read, -1); }
};

// Sends `signal` to a worker's process group, which includes what it started.
void signal_worker(pid_t pid, int signal);

}  // namespace accel
