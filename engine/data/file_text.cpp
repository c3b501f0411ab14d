#include "engine/data/file_text.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>

namespace accel::data {

std::string read_file_text(const std::string& path) {
  // gzread passes files that are not gzip through unchanged.
  errno = 0;
  std::unique_ptr<gzFile_s, int (*)(gzFile)> file(gzopen(path.c_str(), "rb"), gzclose);
  if (!file) {
    throw std::runtime_error("cannot open '" + path + "': " +
                             (errno ? std::strerror(errno) : "out of memory"));
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
