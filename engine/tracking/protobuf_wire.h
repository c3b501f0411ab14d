// The encoding half of protocol buffers' wire format, for the few messages
// of TensorBoard's event files (event_file_writer.cpp names their fields).
//
// accel keeps its own encoder rather than link libprotobuf: the CUDA build's
// LibTorch (PyTorch's wheels) exports a protobuf of its own (3.13) from
// libtorch_cpu.so, which would take over the symbols of any shared
// libprotobuf loaded beside it, and Debian's static libprotobuf cannot be
// linked into a shared library. The messages accel writes need only
// varints, fixed-width numbers and length-delimited fields.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace accel::tracking {

// One message being written. Fields are appended in the order they are
// written; a nested message is written into its own ProtoWriter first.
// clear() keeps the buffer's memory, so a reused writer allocates nothing
// once warm.
class ProtoWriter {
 public:
  void varint(int field, uint64_t value);
  void int64(int field, int64_t value) { varint(field, static_cast<uint64_t>(value)); }
  void boolean(int field, bool value) { varint(field, value ? 1 : 0); }
  void float64(int field, double value);  // fixed64
  void float32(int field, float value);   // fixed32
  void bytes(int field, std::string_view value);
  void message(int field, const ProtoWriter& inner) { bytes(field, inner.data()); }

  const std::string& data() const { return out_; }
  void clear() { out_.clear(); }

 private:
  void tag(int field, int wire_type);
  void raw_varint(uint64_t value);

  std::string out_;
};

}  // namespace accel::tracking
