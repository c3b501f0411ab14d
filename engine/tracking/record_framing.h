// TensorBoard's record framing (TFRecord): each record is
//   uint64 length, uint32 masked CRC-32C of those 8 bytes,
//   the data, uint32 masked CRC-32C of the data,
// little-endian. The mask rotates the CRC and adds a constant, so that a
// CRC computed over data that holds CRCs stays strong.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace accel::tracking {

uint32_t masked_crc32c(std::string_view data);

// Appends `data` framed as one record to `out`.
void append_record(std::string& out, std::string_view data);

}  // namespace accel::tracking
