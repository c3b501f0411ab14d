#include "engine/tracking/protobuf_wire.h"

#include <cstring>

namespace accel::tracking {
namespace {

// Wire types (protobuf's encoding guide).
constexpr int kVarint = 0;
constexpr int kFixed64 = 1;
constexpr int kLengthDelimited = 2;
constexpr int kFixed32 = 5;

// Fixed-width fields are little-endian on the wire, as in memory here.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "protobuf_wire.cpp writes host byte order");
template <typename T>
void append_bytes_of(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

}  // namespace

void ProtoWriter::raw_varint(uint64_t value) {
  while (value >= 0x80) {
    out_.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out_.push_back(static_cast<char>(value));
}

void ProtoWriter::tag(int field, int wire_type) {
  raw_varint((static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type));
}

void ProtoWriter::varint(int field, uint64_t value) {
  tag(field, kVarint);
  raw_varint(value);
}

void ProtoWriter::float64(int field, double value) {
  tag(field, kFixed64);
  append_bytes_of(out_, value);
}

void ProtoWriter::float32(int field, float value) {
  tag(field, kFixed32);
  append_bytes_of(out_, value);
}

void ProtoWriter::bytes(int field, std::string_view value) {
  tag(field, kLengthDelimited);
  raw_varint(value.size());
  out_.append(value);
}

}  // namespace accel::tracking
