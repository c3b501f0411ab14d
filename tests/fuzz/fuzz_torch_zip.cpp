// Feeds the input to read_torch_state_dict as a pytorch_model.bin: the zip
// directory (ZipDirectory, read before anything is extracted), LibTorch's
// zip reader, the pickle and the storages it names.
// Finding: anything but a FormatError escaping, a crash, a sanitizer
// report in the engine's code, a hang or a leak; also a loaded tensor with
// more bytes than the file could describe (decompression beyond the bounds).
#include <cstdlib>
#include <set>

#include "engine/formats/format_error.h"
#include "engine/formats/torch_pickle.h"
#include "tests/fuzz/scratch_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace accel::formats;
  const std::string path = accel::fuzz::write_scratch("pytorch_model.bin", data, size);
  try {
    uint64_t bytes = 0;
    std::set<const void*> storages;  // tensors may share one
    for (const auto& [name, tensor] : read_torch_state_dict(path)) {
      if (storages.insert(tensor.storage().data()).second) bytes += tensor.storage().nbytes();
    }
    // Deflate expands at most about 1032 times; whatever loads beyond that
    // was allocated from a size the file did not back.
    if (bytes > 1100 * static_cast<uint64_t>(size)) std::abort();
  } catch (const FormatError&) {
  }
  return 0;
}
