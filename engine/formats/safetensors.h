// The safetensors format (https://github.com/huggingface/safetensors), which
// the Hugging Face tools read:
//
//   8 bytes   N, the header's length, unsigned little-endian
//   N bytes   a JSON object: for every tensor
//               "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
//             and optionally "__metadata__": {string: string}; padded with
//             spaces so that the data starts 8-byte aligned
//   the data  each tensor's bytes, little-endian, row-major, at
//             [8 + N + begin, 8 + N + end), packed without gaps in the
//             order the tensors were given
//
// dtypes: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL. Tensors may be 0-dim
// (shape []) or empty.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/formats/file_io.h"

namespace accel::formats {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;
using Metadata = std::map<std::string, std::string>;

// "F32" for float32 and so on; a dtype safetensors has no name for is an
// error naming `tensor_name`.
std::string safetensors_dtype(at::ScalarType type, const std::string& tensor_name);

// Writes `tensors` in the order given (names must be unique), fsyncs, and
// returns the file's size and CRC-32C. Tensors on other devices or not
// contiguous are copied to contiguous CPU memory one at a time. A pace
// (write_pace.h) slows the writing, never changes its bytes.
FileDigest write_safetensors(const std::string& path, const NamedTensors& tensors,
                             const Metadata& metadata = {}, WritePace* pace = nullptr);

// The size and CRC-32C that write_safetensors would give for `tensors`
// (CPU and contiguous), computed without writing: an asynchronous save
// lists them in the manifest before its files are written.
FileDigest safetensors_digest(const NamedTensors& tensors, const Metadata& metadata = {});

// One header entry, before its data is read.
struct TensorEntry {
  std::string name;
  at::ScalarType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // offsets into the data section
  uint64_t end = 0;
};

struct SafetensorsHeader {
  std::vector<TensorEntry> tensors;  // in data order
  Metadata metadata;
  uint64_t data_start = 0;  // 8 + N
};

// Parses and checks a header: known dtypes, offsets that agree with the
// shapes, no overlaps, everything inside a file of `file_size` bytes.
// Errors name `path` and the tensor.
SafetensorsHeader parse_safetensors_header(const std::string& json, uint64_t file_size,
                                           const std::string& path);

// Reads the length and the header from the start of `reader`'s file, and
// checks them as parse_safetensors_header does.
SafetensorsHeader read_safetensors_header(FileReader& reader);

struct SafetensorsFile {
  NamedTensors tensors;  // in data order, each in its own CPU memory
  Metadata metadata;
  FileDigest digest;  // of the whole file, computed while reading
};

// Reads every tensor straight into its own memory in one pass over the file.
SafetensorsFile read_safetensors(const std::string& path);

}  // namespace accel::formats
