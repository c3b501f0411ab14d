#include "engine/launch/run_guardian.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "engine/protocol/accel_variables.h"
#include "engine/protocol/process_stat.h"

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

namespace {

// The names in /dev/shm, where shm_open keeps its segments.
std::vector<std::string> shm_segment_names() {
  std::vector<std::string> names;
  DIR* dir = ::opendir("/dev/shm");
  if (!dir) return names;
  while (const dirent* entry = ::readdir(dir)) names.emplace_back(entry->d_name);
  ::closedir(dir);
  return names;
}

}  // namespace

void remove_shm_segments(const std::string& prefix) {
  if (prefix.empty()) return;  // never everything
  for (const std::string& name : shm_segment_names()) {
    if (name.compare(0, prefix.size(), prefix) == 0) ::shm_unlink(("/" + name).c_str());
  }
}

namespace {

// The PID namespace this process sees pids in, by its inode; 0 when unknown.
unsigned long long pid_namespace() {
  char link[64] = {};
  if (::readlink("/proc/self/ns/pid", link, sizeof link - 1) < 0) return 0;
  unsigned long long inode = 0;
  return std::sscanf(link, "pid:[%llu]", &inode) == 1 ? inode : 0;
}

// When process `pid` started, in seconds since the epoch; nullopt when no
// such process runs.
std::optional<double> process_start(pid_t pid) {
  const std::string text = process_stat(pid);
  const size_t name_end = text.rfind(')');
  if (name_end == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(name_end + 2));
  std::string field;
  for (int i = 3; i < 22 && fields >> field;) ++i;  // fields 3..21; the 22nd is starttime
  unsigned long long ticks = 0;
  if (!(fields >> ticks)) return std::nullopt;
  std::ifstream machine("/proc/stat");
  unsigned long long boot = 0;
  for (std::string key; machine >> key;) {
    if (key == "btime" && machine >> boot) break;
  }
  return static_cast<double>(boot) + static_cast<double>(ticks) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

}  // namespace

std::string new_shm_prefix() {
  uint32_t nonce = 0;
  if (::getrandom(&nonce, sizeof nonce, 0) != sizeof nonce) nonce = static_cast<uint32_t>(::getpid()) * 2654435761u;
  char prefix[64];
  std::snprintf(prefix, sizeof prefix, "accel-%d-%llu-%08x-", static_cast<int>(::getpid()), pid_namespace(), nonce);
  return prefix;
}

AbandonedSegments remove_abandoned_segments() {
  AbandonedSegments removed;
  const unsigned long long ours = pid_namespace();
  if (ours == 0) return removed;  // whose pids the names hold is unknown
  for (const std::string& name : shm_segment_names()) {
    int pid = 0;
    unsigned long long namespace_inode = 0;
    unsigned nonce = 0;
    int end = 0;
    if (std::sscanf(name.c_str(), "accel-%d-%llu-%8x-%n", &pid, &namespace_inode, &nonce, &end) != 3 ||
        end == 0 || pid <= 0 || namespace_inode != ours) {
      continue;
    }
    const std::string path = "/dev/shm/" + name;
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0) continue;
    // A launcher that runs started before its segments were made; a process
    // with its pid that started later is another one.
    const std::optional<double> started = process_start(pid);
    const double made = static_cast<double>(info.st_ctim.tv_sec) + 1e-9 * static_cast<double>(info.st_ctim.tv_nsec);
    if (started && *started <= made + 2.0) continue;  // boot time is in whole seconds
    if (::shm_unlink(("/" + name).c_str()) != 0) continue;
    ++removed.count;
    removed.bytes += static_cast<uint64_t>(info.st_size);
    if (std::find(removed.launchers.begin(), removed.launchers.end(), pid) == removed.launchers.end()) {
      removed.launchers.push_back(pid);
    }
  }
  return removed;
}

}  // namespace accel
