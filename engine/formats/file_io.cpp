#include "engine/formats/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "engine/formats/format_error.h"
#include "engine/formats/write_pace.h"

namespace accel::formats {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw FormatError(what + " '" + path + "': " + std::strerror(errno));
}

// Large reads and writes go through in pieces: the kernel caps one call at
// about 2 GiB.
constexpr std::size_t kChunk = std::size_t{1} << 30;
// A paced writer's chunk: a few milliseconds of copying, so that its pauses
// are short against a training step.
constexpr std::size_t kPacedChunk = std::size_t{4} << 20;

}  // namespace

// A pace of a whole core never sleeps: the writer then goes as without one.
FileWriter::FileWriter(std::string path, WritePace* pace)
    : path_(std::move(path)), pace_(pace && pace->paced() ? pace : nullptr) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("cannot create", path_);
}

FileWriter::~FileWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void FileWriter::write(const void* data, std::size_t size) {
  const auto* p = static_cast<const char*>(data);
  const std::size_t chunk = pace_ ? kPacedChunk : kChunk;
  while (size > 0) {
    ssize_t n = ::write(fd_, p, size < chunk ? size : chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot write", path_);
    }
    crc_.update(p, static_cast<std::size_t>(n));
    if (pace_) {
      // The writeback starts now, on this thread's time, rather than in one
      // burst of the kernel's flusher at fsync. Advisory: finish()'s fsync
      // is what makes the bytes durable, so a filesystem without it is fine.
      ::sync_file_range(fd_, static_cast<off_t>(size_), n, SYNC_FILE_RANGE_WRITE);
      pace_->after_chunk();
    }
    p += n;
    size -= static_cast<std::size_t>(n);
    size_ += static_cast<uint64_t>(n);
  }
}

FileDigest FileWriter::finish() {
  if (::fsync(fd_) != 0) fail("cannot fsync", path_);
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("cannot close", path_);
  return FileDigest{size_, crc_.value()};
}

FileReader::FileReader(std::string path) : path_(std::move(path)) {
  try {
    fd_ = open_outside_file(path_, &size_);
  } catch (const OutsideFileError& e) {
    throw FormatError(e.what());
  }
  // The whole file is read once, front to back.
  ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
}

FileReader::~FileReader() {
  if (fd_ >= 0) ::close(fd_);
}

void FileReader::read(void* out, std::size_t size, const char* what) {
  if (size > size_ - position_) {
    throw FormatError("'" + path_ + "' is truncated: " + what + " needs bytes " +
                          std::to_string(position_) + " to " + std::to_string(position_ + size) +
                          " but the file has " + std::to_string(size_));
  }
  auto* p = static_cast<char*>(out);
  std::size_t left = size;
  while (left > 0) {
    ssize_t n = ::read(fd_, p, left < kChunk ? left : kChunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot read", path_);
    }
    if (n == 0) {
      throw FormatError("'" + path_ + "' ended early while reading " + what +
                            " (it shrank while being read)");
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  crc_.update(out, size);
  position_ += size;
}

void FileReader::read_at(uint64_t offset, void* out, std::size_t size, const char* what) {
  if (offset > size_ || size > size_ - offset) {
    throw FormatError("'" + path_ + "' is truncated: " + what + " needs bytes " + std::to_string(offset) +
                          " to " + std::to_string(offset + size) + " but the file has " + std::to_string(size_));
  }
  auto* p = static_cast<char*>(out);
  while (size > 0) {
    ssize_t n = ::pread(fd_, p, size < kChunk ? size : kChunk, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot read", path_);
    }
    if (n == 0) throw FormatError("'" + path_ + "' ended early while reading " + what);
    p += n;
    offset += static_cast<uint64_t>(n);
    size -= static_cast<std::size_t>(n);
  }
}

FileDigest FileReader::finish() {
  std::vector<char> rest(1 << 20);
  while (position_ < size_) {
    std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(rest.size(), size_ - position_));
    read(rest.data(), n, "the file's last bytes");
  }
  return FileDigest{size_, crc_.value()};
}

FileDigest write_whole_file(const std::string& path, const std::string& contents) {
  FileWriter writer(path);
  writer.write(contents.data(), contents.size());
  return writer.finish();
}

std::string read_whole_file(const std::string& path, uint64_t max_bytes, FileDigest* digest) {
  FileReader reader(path);
  if (reader.size() > max_bytes) {
    throw FormatError("'" + path + "' has " + std::to_string(reader.size()) + " bytes, more than the " +
                          std::to_string(max_bytes) + " it may have");
  }
  std::string contents(reader.size(), '\0');
  reader.read(contents.data(), contents.size(), "the contents");
  FileDigest d = reader.finish();
  if (digest) *digest = d;
  return contents;
}

FileDigest digest_file(const std::string& path) {
  FileReader reader(path);
  return reader.finish();
}

void check_digest(const std::string& path, const FileDigest& expected, const FileDigest& actual) {
  if (actual.size != expected.size) {
    throw FormatError("checkpoint file '" + path + "' has " + std::to_string(actual.size) +
                          " bytes but the manifest says " + std::to_string(expected.size) +
                          ": it is truncated or was replaced");
  }
  if (actual.crc32c != expected.crc32c) {
    throw FormatError("checkpoint file '" + path + "' fails its checksum (crc32c " +
                          crc32c_hex(actual.crc32c) + ", the manifest says " +
                          crc32c_hex(expected.crc32c) + "): its contents were altered or damaged");
  }
}

}  // namespace accel::formats
