// Feeds the input to read_safetensors as a whole .safetensors file: the
// 8-byte header length, the JSON header (parse_json and
// parse_safetensors_header) and the tensor data it points at.
// Finding: anything but a FormatError escaping, a crash, a sanitizer
// report, a hang or a leak; also a file that loads while a tensor's bytes
// disagree with its shape and dtype.
#include <cstdlib>

#include "engine/formats/format_error.h"
#include "engine/formats/safetensors.h"
#include "tests/fuzz/scratch_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace accel::formats;
  const std::string path = accel::fuzz::write_scratch("model.safetensors", data, size);
  try {
    const SafetensorsFile file = read_safetensors(path);
    uint64_t bytes = 0;
    for (const auto& [name, tensor] : file.tensors) bytes += tensor.numel() * tensor.element_size();
    if (bytes > size) std::abort();  // tensors cannot hold more than the file
  } catch (const FormatError&) {
  }
  return 0;
}
