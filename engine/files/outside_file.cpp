#include "engine/files/outside_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace accel {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw OutsideFileError(what + " '" + path + "': " + std::strerror(errno));
}

}  // namespace

std::string file_kind(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a file";
}

OutsideFileKind outside_file_kind(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return OutsideFileKind::Missing;
  return S_ISREG(st.st_mode) ? OutsideFileKind::Regular : OutsideFileKind::Other;
}

int open_outside_file(const std::string& path, uint64_t* size) {
  // O_NONBLOCK: opening a FIFO waits for a writer otherwise, forever.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail("cannot open", path);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int saved = errno;
    ::close(fd);
    errno = saved;
    if (!S_ISREG(st.st_mode) && st.st_mode != 0) {
      throw OutsideFileError("'" + path + "' is not a regular file (" + file_kind(st.st_mode) +
                             "): refusing to read it");
    }
    fail("cannot stat", path);
  }
  *size = static_cast<uint64_t>(st.st_size);
  return fd;
}

std::string read_outside_file(const std::string& path, uint64_t max_bytes) {
  uint64_t size = 0;
  const int fd = open_outside_file(path, &size);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  if (size > max_bytes) {
    throw OutsideFileError("'" + path + "' has " + std::to_string(size) + " bytes, more than the " +
                           std::to_string(max_bytes) + " such a file may have");
  }
  std::string contents(size, '\0');
  std::size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::read(fd, contents.data() + done, contents.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot read", path);
    }
    if (n == 0) throw OutsideFileError("'" + path + "' ended early (it shrank while being read)");
    done += static_cast<std::size_t>(n);
  }
  return contents;
}

}  // namespace accel
