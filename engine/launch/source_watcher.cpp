#include "engine/launch/source_watcher.h"

#include <sys/inotify.h>
#include <sys/stat.h>
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

SourceWatcher::SourceWatcher(const std::string& recipe, const std::string& working_directory) {
  const size_t slash = recipe.rfind('/');
  folder_ = slash == std::string::npos ? "." : slash == 0 ? "/" : recipe.substr(0, slash);
  // Watched again by its full path: a relative one would follow the
  // launcher's working directory wherever that folder was moved.
  path_ = folder_[0] == '/' ? folder_ : working_directory + "/" + folder_;
  fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd_ < 0) throw std::runtime_error(std::string("cannot watch files (inotify): ") + std::strerror(errno));
  if (!rewatch()) {
    const int error = errno;
    ::close(fd_);
    throw std::runtime_error("cannot watch the recipe's folder " + folder_ + ": " + std::strerror(error));
  }
}

bool SourceWatcher::rewatch() {
  if (wd_ >= 0) return true;
  struct stat info {};
  if (::stat(path_.c_str(), &info) != 0) return false;
  wd_ = ::inotify_add_watch(fd_, path_.c_str(), IN_CLOSE_WRITE | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF);
  if (wd_ < 0) return false;
  const std::pair<unsigned long, unsigned long> folder{info.st_dev, info.st_ino};
  recreated_ = watched_ && folder != now_;
  watched_ = true;
  now_ = folder;
  return true;
}

bool SourceWatcher::lost() {
  if (wd_ < 0) return true;
  // The kernel says a folder is deleted only once nothing uses it, and a
  // launcher or its workers may work in it: its path is checked too.
  struct stat info {};
  if (::stat(path_.c_str(), &info) == 0 && std::make_pair(info.st_dev, info.st_ino) == now_) return false;
  ::inotify_rm_watch(fd_, wd_);
  wd_ = -1;
  return true;
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
      if (event->wd == wd_ && (event->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED))) {
        // Gone, or moved elsewhere (where a moved folder's watch would follow it).
        if (!(event->mask & IN_IGNORED)) ::inotify_rm_watch(fd_, wd_);
        wd_ = -1;
      } else if (event->wd == wd_ && event->len > 0) {
        std::string name(event->name);
        if (is_lua_file(name)) changed.push_back(std::move(name));
      }
      at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
    }
  }
}

}  // namespace accel
