#include "engine/formats/safetensors.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "engine/formats/format_error.h"
#include "engine/json/json_reader.h"

namespace accel::formats {

using strict_json::json_integer;
using strict_json::json_member;
using strict_json::json_string;
using strict_json::json_unsigned;
using strict_json::json_utf8;

namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors files are little-endian; the engine writes memory as is");

// The safetensors library refuses larger headers; so do we, before
// allocating for one.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DtypeName {
  at::ScalarType type;
  const char* name;
};

constexpr DtypeName kDtypes[] = {
    {at::kDouble, "F64"}, {at::kFloat, "F32"}, {at::kHalf, "F16"},  {at::kBFloat16, "BF16"},
    {at::kLong, "I64"},   {at::kInt, "I32"},   {at::kShort, "I16"}, {at::kChar, "I8"},
    {at::kByte, "U8"},    {at::kBool, "BOOL"},
};

at::ScalarType parse_dtype(const std::string& name, const std::string& tensor, const std::string& path) {
  for (const DtypeName& d : kDtypes) {
    if (name == d.name) return d.type;
  }
  throw FormatError("'" + path + "': tensor '" + tensor + "' has dtype '" + name +
                        "', which the engine cannot hold (supported: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL)");
}

std::string header_json(const NamedTensors& tensors, const Metadata& metadata) {
  // Tensors in the order given (readers list them so), metadata first.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json& entries = header["__metadata__"] = nlohmann::ordered_json::object();
    for (const auto& [key, value] : metadata) {
      entries[json_utf8(key, "the metadata key '" + key + "'")] = json_utf8(value, "the metadata value of '" + key + "'");
    }
  }
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    const uint64_t bytes = tensor.numel() * tensor.element_size();
    header[json_utf8(name, "the tensor name '" + name + "'")] = {
        {"dtype", safetensors_dtype(tensor.scalar_type(), name)},
        {"shape", tensor.sizes().vec()},
        {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  return json;
}

uint64_t read_u64_le(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

std::string safetensors_dtype(at::ScalarType type, const std::string& tensor_name) {
  for (const DtypeName& d : kDtypes) {
    if (type == d.type) return d.name;
  }
  throw FormatError(std::string("tensor '") + tensor_name + "' has dtype " + at::toString(type) +
                        ", which safetensors files cannot hold");
}

FileDigest write_safetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata,
                             WritePace* pace) {
  std::set<std::string> names;
  for (const auto& [name, tensor] : tensors) {
    if (!tensor.defined()) throw FormatError("'" + path + "': tensor '" + name + "' is undefined");
    if (name == "__metadata__") {
      throw FormatError("'" + path + "': a tensor may not be named '__metadata__', the format's own key");
    }
    if (!names.insert(name).second) {
      throw FormatError("'" + path + "': the tensor name '" + name + "' appears twice");
    }
  }
  std::string header = header_json(tensors, metadata);
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(uint64_t{header.size()} >> (8 * i));
  FileWriter writer(path, pace);
  writer.write(length, 8);
  writer.write(header.data(), header.size());
  for (const auto& [name, tensor] : tensors) {
    at::Tensor t = tensor.device().is_cpu() ? tensor : tensor.cpu();
    t = t.contiguous();
    writer.write(t.data_ptr(), t.numel() * t.element_size());
  }
  return writer.finish();
}

FileDigest safetensors_digest(const NamedTensors& tensors, const Metadata& metadata) {
  const std::string header = header_json(tensors, metadata);
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(uint64_t{header.size()} >> (8 * i));
  Crc32c crc;
  crc.update(length, 8);
  crc.update(header.data(), header.size());
  uint64_t size = 8 + header.size();
  for (const auto& [name, tensor] : tensors) {
    const size_t bytes = static_cast<size_t>(tensor.numel() * tensor.element_size());
    crc.update(tensor.data_ptr(), bytes);
    size += bytes;
  }
  return {size, crc.value()};
}

// The reader itself; its caller turns its JSON errors into FormatError.
static SafetensorsHeader header_from_json(const std::string& json, uint64_t file_size,
                                          const std::string& path) {
  SafetensorsHeader header;
  header.data_start = 8 + json.size();
  uint64_t data_size = file_size - header.data_start;
  nlohmann::json root = strict_json::parse_json(json, path + " (safetensors header)", kMaxHeaderBytes);
  for (const auto& [name, value] : root.items()) {
    if (name == "__metadata__") {
      std::string where = "'" + path + "': __metadata__";
      if (!value.is_object()) throw FormatError(where + " is not an object");
      for (const auto& [key, text] : value.items()) {
        header.metadata[key] = json_string(text, where + "['" + key + "']");
      }
      continue;
    }
    std::string where = "'" + path + "': tensor '" + name + "'";
    if (!value.is_object()) throw FormatError(where + " is not an object with dtype, shape and data_offsets");
    TensorEntry entry;
    entry.name = name;
    entry.dtype = parse_dtype(json_string(json_member(value, "dtype", where), where + ": dtype"), name, path);
    const nlohmann::json& shape = json_member(value, "shape", where);
    if (!shape.is_array()) throw FormatError(where + ": shape is not a list");
    uint64_t bytes = at::elementSize(entry.dtype);
    for (std::size_t d = 0; d < shape.size(); ++d) {
      entry.shape.push_back(json_integer(shape[d], where + ": shape[" + std::to_string(d) + "]"));
      if (entry.shape.back() < 0) throw FormatError(where + " has a negative size in its shape");
      // Sizes whose product wraps would let a tiny data range pass for a
      // huge tensor.
      if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(entry.shape.back()), &bytes) ||
          bytes > static_cast<uint64_t>(INT64_MAX)) {
        throw FormatError(where + " has a shape whose size does not fit in 64 bits");
      }
    }
    const nlohmann::json& offsets = json_member(value, "data_offsets", where);
    if (!offsets.is_array() || offsets.size() != 2) {
      throw FormatError(where + ": data_offsets must be [begin, end]");
    }
    entry.begin = json_unsigned(offsets[0], where + ": data_offsets[0]");
    entry.end = json_unsigned(offsets[1], where + ": data_offsets[1]");
    if (entry.end < entry.begin || entry.end - entry.begin != bytes) {
      throw FormatError(where + " has data_offsets [" + std::to_string(entry.begin) + ", " +
                            std::to_string(entry.end) + "] but its shape and dtype need " +
                            std::to_string(bytes) + " bytes");
    }
    if (entry.end > data_size) {
      throw FormatError("'" + path + "' is truncated: tensor '" + name + "' ends at byte " +
                            std::to_string(header.data_start + entry.end) + " but the file has " +
                            std::to_string(file_size));
    }
    header.tensors.push_back(std::move(entry));
  }
  std::sort(header.tensors.begin(), header.tensors.end(),
            [](const TensorEntry& a, const TensorEntry& b) { return a.begin < b.begin; });
  for (std::size_t i = 1; i < header.tensors.size(); ++i) {
    if (header.tensors[i].begin < header.tensors[i - 1].end) {
      throw FormatError("'" + path + "': tensors '" + header.tensors[i - 1].name + "' and '" +
                            header.tensors[i].name + "' overlap");
    }
  }
  return header;
}

SafetensorsHeader parse_safetensors_header(const std::string& json, uint64_t file_size,
                                          const std::string& path) {
  return rethrow_json_errors([&] { return header_from_json(json, file_size, path); });
}

SafetensorsHeader read_safetensors_header(FileReader& reader) {
  const std::string& path = reader.path();
  unsigned char length_bytes[8];
  reader.read(length_bytes, 8, "the header length");
  uint64_t length = read_u64_le(length_bytes);
  if (length > kMaxHeaderBytes || length > reader.size() - 8) {
    throw FormatError("'" + path + "' is not a safetensors file or is truncated: its header length " +
                          std::to_string(length) + " does not fit in its " + std::to_string(reader.size()) +
                          " bytes");
  }
  std::string json(length, '\0');
  reader.read(json.data(), length, "the header");
  return parse_safetensors_header(json, reader.size(), path);
}

SafetensorsFile read_safetensors(const std::string& path) {
  FileReader reader(path);
  SafetensorsHeader header = read_safetensors_header(reader);
  SafetensorsFile file;
  file.metadata = std::move(header.metadata);
  std::vector<char> gap;
  for (const TensorEntry& entry : header.tensors) {
    uint64_t at_offset = header.data_start + entry.begin;
    if (at_offset > reader.position()) {  // bytes no tensor claims still count toward the checksum
      gap.resize(at_offset - reader.position());
      reader.read(gap.data(), gap.size(), "the bytes between tensors");
    }
    at::Tensor t = at::empty(entry.shape, at::TensorOptions().dtype(entry.dtype));
    std::string what = "tensor '" + entry.name + "'";
    reader.read(t.data_ptr(), entry.end - entry.begin, what.c_str());
    file.tensors.emplace_back(entry.name, std::move(t));
  }
  file.digest = reader.finish();
  return file;
}

}  // namespace accel::formats
