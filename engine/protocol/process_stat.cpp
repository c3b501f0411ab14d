#include "engine/protocol/process_stat.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace accel {

std::string process_stat(long pid) {
  const int fd = ::open(("/proc/" + std::to_string(pid) + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  // One line of a few hundred bytes (the command name is at most 64).
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) < 0 && errno == EINTR) {
  }
  ::close(fd);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

}  // namespace accel
