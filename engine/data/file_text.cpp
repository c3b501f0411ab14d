#include "engine/data/file_text.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>

namespace accel::data {

std::string read_file_text(const std::string& path) {
  // gzread passes files that are not gzip through unchanged.
  errno = 0;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("cannot open '" + path + "': " + std::strerror(errno));
  }
  const uint64_t on_disk = S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0;
  const uint64_t limit = std::max(kMinTextLimit, on_disk * kMaxInflation);
  std::unique_ptr<gzFile_s, int (*)(gzFile)> file(gzdopen(fd, "rb"), gzclose);
  if (!file) {
    ::close(fd);
    throw std::runtime_error("cannot open '" + path + "': out of memory");
  }
  gzbuffer(file.get(), 1 << 17);
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    int n = gzread(file.get(), buffer, sizeof(buffer));
    if (n < 0) {
      int code = 0;
      const char* message = gzerror(file.get(), &code);
      throw std::runtime_error("cannot read '" + path + "': " +
                               (code == Z_ERRNO ? std::strerror(errno) : message));
    }
    if (n == 0) break;
    if (text.size() + static_cast<size_t>(n) > limit) {
      throw std::runtime_error("'" + path + "' expands to more than " + std::to_string(limit) + " bytes (" +
                               std::to_string(kMaxInflation) + " times its " + std::to_string(on_disk) +
                               " bytes, or " + std::to_string(kMinTextLimit) +
                               "): refusing a likely decompression bomb; decompress it yourself if it is not one");
    }
    text.append(buffer, static_cast<size_t>(n));
  }
  // A truncated gzip stream reads as a short file unless its error is checked.
  int code = 0;
  const char* message = gzerror(file.get(), &code);
  if (code != Z_OK && code != Z_STREAM_END) {
    throw std::runtime_error("cannot read '" + path + "': " + message);
  }
  return text;
}

}  // namespace accel::data
