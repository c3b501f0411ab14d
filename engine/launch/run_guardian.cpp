#include "engine/launch/run_guardian.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <set>
#include <stdexcept>
#include <vector>

#include "engine/protocol/accel_variables.h"

namespace accel {

RunGuardian::RunGuardian(const std::string& program, const std::string& shm_prefix) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("cannot create the guardian's pipe: ") + std::strerror(errno));
  }
  // The guardian keeps none of the launcher's output open: whoever reads
  // it (a shell's $(...)) sees its end when the launcher ends.
  const int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  // Built before fork: the child may only make async-signal-safe calls.
  std::string role = std::string(variables::kRole) + "=" + kGuardianRole;
  std::string prefix = std::string(variables::kShmPrefix) + "=" + shm_prefix;
  char* argv[] = {const_cast<char*>("accel-run-guardian"), nullptr};
  char* envp[] = {role.data(), prefix.data(), nullptr};
  sigset_t all, previous;
  sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, &previous);
  pid_ = ::fork();
  if (pid_ == 0) {
    ::setsid();
    if (null_fd >= 0 && ::dup2(fds[0], STDIN_FILENO) == STDIN_FILENO &&
        ::dup2(null_fd, STDOUT_FILENO) == STDOUT_FILENO && ::dup2(null_fd, STDERR_FILENO) == STDERR_FILENO) {
      // Default dispositions and mask: the guardian sets its own.
      for (int s = 1; s < NSIG; ++s) ::signal(s, SIG_DFL);
      ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
      ::execve(program.c_str(), argv, envp);
    }
    ::_exit(127);
  }
  const int fork_error = errno;
  ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  ::close(fds[0]);
  if (null_fd >= 0) ::close(null_fd);
  if (pid_ < 0) {
    ::close(fds[1]);
    throw std::runtime_error(std::string("cannot start the run's guardian: ") + std::strerror(fork_error));
  }
  pipe_ = fds[1];
}

RunGuardian::~RunGuardian() {
  ::close(pipe_);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

void RunGuardian::send(char what, pid_t group) {
  char line[32];
  const int n = std::snprintf(line, sizeof line, "%c%d\n", what, static_cast<int>(group));
  // One short write is atomic on a pipe. A guardian that is gone cannot be
  // helped here (SIGPIPE is ignored while workers are supervised); the
  // launcher still ends groups and segments itself.
  [[maybe_unused]] ssize_t written = ::write(pipe_, line, static_cast<size_t>(n));
}

void RunGuardian::watch(pid_t group) { send('+', group); }
void RunGuardian::forget(pid_t group) { send('-', group); }

int run_guardian(const std::string& shm_prefix) {
  // Only the pipe's end ends a guardian: a Ctrl-C or a SIGTERM meant for the
  // run must not stop it before the cleanup it exists for.
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE}) ::signal(s, SIG_IGN);
  std::set<pid_t> groups;
  std::string pending;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(STDIN_FILENO, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(buffer, static_cast<size_t>(n));
    std::size_t end;
    while ((end = pending.find('\n')) != std::string::npos) {
      const std::string line = pending.substr(0, end);
      pending.erase(0, end + 1);
      if (line.size() < 2) continue;
      const long pid = std::strtol(line.c_str() + 1, nullptr, 10);
      if (pid <= 1) continue;
      if (line[0] == '+') groups.insert(static_cast<pid_t>(pid));
      if (line[0] == '-') groups.erase(static_cast<pid_t>(pid));
    }
  }
  for (pid_t group : groups) end_process_group(group);
  remove_shm_segments(shm_prefix);
  return 0;
}

void end_process_group(pid_t group) {
  if (group > 1) ::kill(-group, SIGKILL);
}

void remove_shm_segments(const std::string& prefix) {
  if (prefix.empty()) return;  // never everything
  DIR* dir = ::opendir("/dev/shm");
  if (!dir) return;
  std::vector<std::string> names;
  while (const dirent* entry = ::readdir(dir)) {
    if (std::strncmp(entry->d_name, prefix.c_str(), prefix.size()) == 0) names.emplace_back(entry->d_name);
  }
  ::closedir(dir);
  for (const std::string& name : names) ::shm_unlink(("/" + name).c_str());
}

std::string new_shm_prefix() {
  uint32_t nonce = 0;
  if (::getrandom(&nonce, sizeof nonce, 0) != sizeof nonce) nonce = static_cast<uint32_t>(::getpid()) * 2654435761u;
  char prefix[48];
  std::snprintf(prefix, sizeof prefix, "accel-%d-%08x-", static_cast<int>(::getpid()), nonce);
  return prefix;
}

}  // namespace accel
