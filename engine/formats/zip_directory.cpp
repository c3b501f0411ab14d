#include "engine/formats/zip_directory.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "engine/formats/format_error.h"

namespace accel::formats {
namespace {

constexpr uint32_t kEndSignature = 0x06054b50;
constexpr uint32_t kEnd64LocatorSignature = 0x07064b50;
constexpr uint32_t kEnd64Signature = 0x06064b50;
constexpr uint32_t kEntrySignature = 0x02014b50;
constexpr std::size_t kEndBytes = 22, kEnd64LocatorBytes = 20, kEnd64Bytes = 56, kEntryBytes = 46;
constexpr std::size_t kMaxCommentBytes = 0xffff;
// A state dict has a few records per tensor: 64 MiB of directory is a
// million tensors.
constexpr uint64_t kMaxDirectoryBytes = 64ull << 20;

uint64_t le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

[[noreturn]] void refuse(const std::string& source, const std::string& why) {
  throw FormatError("'" + source + "' is not a zip archive torch.save could have written: " + why);
}

}  // namespace

ZipDirectory::ZipDirectory(const ReadAt& read_at, uint64_t size, const std::string& source) : source_(source) {
  if (size < kEndBytes) refuse(source, "it is shorter than a zip directory");
  // The end record is the last 22 bytes plus a comment of up to 64 KiB:
  // search backwards, as miniz does, for the last signature.
  std::size_t tail_bytes = static_cast<std::size_t>(std::min<uint64_t>(size, kEndBytes + kMaxCommentBytes));
  std::vector<unsigned char> tail(tail_bytes);
  read_at(size - tail_bytes, tail.data(), tail_bytes);
  std::size_t end = tail_bytes - kEndBytes + 1;
  while (end-- > 0 && le(&tail[end], 4) != kEndSignature) {
  }
  if (end == static_cast<std::size_t>(-1)) refuse(source, "it has no end-of-directory record");
  const unsigned char* e = &tail[end];
  uint64_t end_at = size - tail_bytes + end;
  uint64_t count = le(e + 10, 2), bytes = le(e + 12, 4), offset = le(e + 16, 4);
  if (count == 0xffff || bytes == 0xffffffff || offset == 0xffffffff) {
    // zip64: a locator just before the end record points at the larger one.
    if (end_at < kEnd64LocatorBytes) refuse(source, "its zip64 locator is missing");
    unsigned char locator[kEnd64LocatorBytes];
    read_at(end_at - kEnd64LocatorBytes, locator, kEnd64LocatorBytes);
    if (le(locator, 4) != kEnd64LocatorSignature) refuse(source, "its zip64 locator is missing");
    uint64_t end64_at = le(locator + 8, 8);
    if (end64_at > size || size - end64_at < kEnd64Bytes) refuse(source, "its zip64 end record lies outside the file");
    unsigned char end64[kEnd64Bytes];
    read_at(end64_at, end64, kEnd64Bytes);
    if (le(end64, 4) != kEnd64Signature) refuse(source, "its zip64 end record is damaged");
    count = le(end64 + 32, 8);
    bytes = le(end64 + 40, 8);
    offset = le(end64 + 48, 8);
  }
  if (offset > size || bytes > size - offset) refuse(source, "its directory lies outside the file");
  if (bytes > kMaxDirectoryBytes) refuse(source, "its directory has " + std::to_string(bytes) + " bytes");
  std::vector<unsigned char> directory(static_cast<std::size_t>(bytes));
  read_at(offset, directory.data(), directory.size());

  std::size_t at = 0;
  for (uint64_t i = 0; i < count; ++i) {
    if (directory.size() - at < kEntryBytes || le(&directory[at], 4) != kEntrySignature) {
      refuse(source, "its directory entry " + std::to_string(i) + " is damaged or missing");
    }
    const unsigned char* d = &directory[at];
    ZipEntry entry;
    entry.uncompressed_size = le(d + 24, 4);
    // Sizes of 0xffffffff are in the zip64 extra field, uncompressed first.
    const bool far_uncompressed = entry.uncompressed_size == 0xffffffff;
    const bool far_compressed = le(d + 20, 4) == 0xffffffff;
    std::size_t name_bytes = le(d + 28, 2), extra_bytes = le(d + 30, 2), comment_bytes = le(d + 32, 2);
    if (directory.size() - at - kEntryBytes < name_bytes + extra_bytes + comment_bytes) {
      refuse(source, "its directory entry " + std::to_string(i) + " runs past the directory");
    }
    std::string name(reinterpret_cast<const char*>(d + kEntryBytes), name_bytes);
    // zip64 extra field: the 64-bit forms of the fields that read 0xffffffff,
    // the uncompressed size first.
    const unsigned char* extra = d + kEntryBytes + name_bytes;
    for (std::size_t x = 0; x + 4 <= extra_bytes;) {
      std::size_t id = le(extra + x, 2), length = le(extra + x + 2, 2);
      if (length > extra_bytes - x - 4) refuse(source, "the extra field of '" + name + "' runs past its entry");
      if (id == 0x0001) {
        if (length < 8u * (far_uncompressed + far_compressed)) {
          refuse(source, "the zip64 field of '" + name + "' is too short");
        }
        // The first zip64 field counts, as in miniz.
        if (far_uncompressed && entry.uncompressed_size == 0xffffffff) {
          entry.uncompressed_size = le(extra + x + 4, 8);
        }
      }
      x += 4 + length;
    }
    if (i == 0) folder_ = name.substr(0, name.find('/') + 1);
    if (!entries_.emplace(name, entry).second) refuse(source, "it lists the record '" + name + "' twice");
    at += kEntryBytes + name_bytes + extra_bytes + comment_bytes;
  }
}

const ZipEntry& ZipDirectory::record(const std::string& name) const {
  auto it = entries_.find(folder_ + name);
  if (it == entries_.end()) throw FormatError("'" + source_ + "' has no record '" + name + "'");
  return it->second;
}

}  // namespace accel::formats
