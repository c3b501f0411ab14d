#include "engine/launch/source_watcher.h"

#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace accel {
namespace {

bool is_lua_file(const std::string& name) {
  return name.size() > 4 && name.compare(name.size() - 4, 4, ".lua") == 0 && name[0] != '.';
}

}  // namespace

SourceWatcher::SourceWatcher(const std::string& recipe) {
  const size_t slash = recipe.rfind('/');
  folder_ = slash == std::string::npos ? "." : slash == 0 ? "/" : recipe.substr(0, slash);
  fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd_ < 0) throw std::runtime_error(std::string("cannot watch files (inotify): ") + std::strerror(errno));
  if (::inotify_add_watch(fd_, folder_.c_str(), IN_CLOSE_WRITE | IN_MOVED_TO) < 0) {
    const int error = errno;
    ::close(fd_);
    throw std::runtime_error("cannot watch the recipe's folder " + folder_ + ": " + std::strerror(error));
  }
}

SourceWatcher::~SourceWatcher() { ::close(fd_); }

std::vector<std::string> SourceWatcher::drain() {
  std::vector<std::string> changed;
  alignas(inotify_event) char buffer[16384];
  for (;;) {
    const ssize_t n = ::read(fd_, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return changed;
    for (ssize_t at = 0; at < n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(buffer + at);
      if (event->len > 0) {
        std::string name(event->name);
        if (is_lua_file(name)) changed.push_back(std::move(name));
      }
      at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
    }
  }
}

}  // namespace accel
