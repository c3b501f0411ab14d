// An append-only file written in batches: what trackers add goes to a
// buffer that reaches the disk every `flush_seconds` (checked as records
// are added), when it grows past a megabyte, and on flush(). A run being
// watched (accel-run plot, TensorBoard) sees its data within seconds, and
// logging every step costs a memory append, not a system call.
#pragma once
#include <chrono>
#include <string>
#include <string_view>

namespace accel::tracking {

class BufferedFile {
 public:
  // Opens `path` for appending, creating it; errors name it with the
  // system's reason.
  BufferedFile(std::string path, double flush_seconds);
  ~BufferedFile();  // flushes what it can and closes
  BufferedFile(const BufferedFile&) = delete;
  BufferedFile& operator=(const BufferedFile&) = delete;

  // Adds bytes; writes the buffer out when it is due.
  void append(std::string_view bytes);
  void flush();
  void close();
  bool is_open() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  std::string buffer_;
  std::chrono::steady_clock::duration interval_;
  std::chrono::steady_clock::time_point last_flush_;
};

}  // namespace accel::tracking
