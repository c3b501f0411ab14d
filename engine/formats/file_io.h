// Whole-file writes and reads that checksum the bytes as they pass, so a
// checkpoint's data is read from disk once. Writes end with fsync: once a
// writer's finish() returns, the bytes survive a crash of the machine.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/formats/checksum.h"
#include "engine/files/outside_file.h"  // file_kind

namespace accel::formats {

// What a manifest records of a file.
struct FileDigest {
  uint64_t size = 0;
  uint32_t crc32c = 0;
};

class WritePace;

// Creates (or truncates) `path`; errors name it with the system's reason.
// With a pace of less than a whole core (a background writer's,
// write_pace.h) it writes in small chunks, starts each one's writeback at
// once and lets the pace sleep between them.
class FileWriter {
 public:
  explicit FileWriter(std::string path, WritePace* pace = nullptr);
  ~FileWriter();  // closes without fsync when finish() was not reached
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;

  void write(const void* data, std::size_t size);
  // fsyncs, closes and returns the size and CRC-32C of everything written.
  FileDigest finish();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  WritePace* pace_;
  int fd_ = -1;
  uint64_t size_ = 0;
  Crc32c crc_;
};

// Reads `path` front to back.
class FileReader {
 public:
  explicit FileReader(std::string path);
  ~FileReader();
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;

  uint64_t size() const { return size_; }
  uint64_t position() const { return position_; }
  // Reads exactly `size` bytes; a file that ends first is an error naming
  // the file, what was being read (`what`) and the offsets.
  void read(void* out, std::size_t size, const char* what);
  // Reads bytes [offset, offset + size) without moving the position or
  // counting them toward the checksum (a directory at a file's end).
  void read_at(uint64_t offset, void* out, std::size_t size, const char* what);
  // Reads the rest of the file (bytes no tensor covers still count toward
  // the checksum) and returns the digest of the whole file.
  FileDigest finish();
  const std::string& path() const { return path_; }
  // For mapping the file's bytes (mapped_tensor.h); the reader keeps it open.
  int fd() const { return fd_; }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  uint64_t position_ = 0;
  Crc32c crc_;
};

FileDigest write_whole_file(const std::string& path, const std::string& contents);
// Refuses, before reading, a file larger than `max_bytes`.
std::string read_whole_file(const std::string& path, uint64_t max_bytes, FileDigest* digest = nullptr);
FileDigest digest_file(const std::string& path);

// Throws, naming the file, when `actual` differs from what the manifest says.
void check_digest(const std::string& path, const FileDigest& expected, const FileDigest& actual);

}  // namespace accel::formats
