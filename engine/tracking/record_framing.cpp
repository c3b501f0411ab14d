#include "engine/tracking/record_framing.h"

#include "engine/formats/checksum.h"

namespace accel::tracking {
namespace {

void append_le(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((value >> (8 * i)) & 0xFF);
}

}  // namespace

uint32_t masked_crc32c(std::string_view data) {
  const uint32_t crc = formats::crc32c(data.data(), data.size());
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

void append_record(std::string& out, std::string_view data) {
  const size_t start = out.size();
  append_le(out, data.size(), 8);
  append_le(out, masked_crc32c(std::string_view(out).substr(start, 8)), 4);
  out.append(data);
  append_le(out, masked_crc32c(data), 4);
}

}  // namespace accel::tracking
