// The central directory of a zip archive (PyTorch's file format for
// torch.save): each record's name, compression and sizes, read before
// LibTorch's reader (miniz) extracts anything. miniz allocates a record at
// the uncompressed size this directory declares and inflates into it, so a
// 2 MB file could declare gigabytes; callers compare these sizes with what
// the records should hold first. Read as miniz reads it: the last
// end-of-directory record, its zip64 form when a field overflows, zip64
// extra fields for sizes; names given twice are refused.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>

namespace accel::formats {

struct ZipEntry {
  uint64_t uncompressed_size = 0;  // what miniz allocates to extract it
};

class ZipDirectory {
 public:
  // `read_at(offset, out, n)` fills `out` with bytes [offset, offset + n) of
  // the archive, `size` bytes long; `source` names it in errors.
  using ReadAt = std::function<void(uint64_t offset, void* out, std::size_t n)>;
  ZipDirectory(const ReadAt& read_at, uint64_t size, const std::string& source);

  // The record `name` of the archive's folder (PyTorch's records live in one
  // folder, named by the first entry, as its reader assumes); refused,
  // naming it, when absent.
  const ZipEntry& record(const std::string& name) const;
  // Every entry, by its full name in the archive.
  const std::map<std::string, ZipEntry>& entries() const { return entries_; }

 private:
  std::string source_;
  std::string folder_;  // with its trailing '/'
  std::map<std::string, ZipEntry> entries_;
};

}  // namespace accel::formats
