#include "engine/tracking/buffered_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace accel::tracking {
namespace {

// A buffer this large is written out at once, whatever the interval.
constexpr std::size_t kMaxBuffered = 1 << 20;

}  // namespace

BufferedFile::BufferedFile(std::string path, double flush_seconds)
    : path_(std::move(path)),
      interval_(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(flush_seconds))),
      last_flush_(std::chrono::steady_clock::now()) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot open " + path_ + ": " + std::strerror(errno));
}

BufferedFile::~BufferedFile() {
  try {
    close();
  } catch (const std::exception&) {
    // A destructor cannot report a full disk; close() called earlier does.
  }
}

void BufferedFile::append(std::string_view bytes) {
  if (fd_ < 0) throw std::logic_error(path_ + " is closed");
  buffer_.append(bytes);
  if (buffer_.size() >= kMaxBuffered || std::chrono::steady_clock::now() - last_flush_ >= interval_) {
    flush();
  }
}

void BufferedFile::flush() {
  last_flush_ = std::chrono::steady_clock::now();
  std::size_t done = 0;
  while (done < buffer_.size() && fd_ >= 0) {
    ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      buffer_.erase(0, done);
      throw std::runtime_error("cannot write " + path_ + ": " + std::strerror(error));
    }
    done += static_cast<std::size_t>(n);
  }
  buffer_.clear();
}

void BufferedFile::close() {
  if (fd_ < 0) return;
  flush();
  ::close(fd_);
  fd_ = -1;
}

}  // namespace accel::tracking
