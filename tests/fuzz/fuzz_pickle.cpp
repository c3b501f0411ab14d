// Feeds the input to unpickle_state_dict as the data.pkl of a torch.save
// file. Storages are served as zeros of the size the pickle declares, up to
// 1 MiB (more is refused as the real reader refuses a size the archive does
// not hold), so the tensors the pickle builds over them are reached too.
// Finding: anything but a FormatError escaping, a crash, a sanitizer
// report, a hang or a leak; also a tensor returned that reaches beyond its
// storage.
#include <ATen/ATen.h>

#include <cstdlib>

#include "engine/formats/format_error.h"
#include "engine/formats/pickle_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace accel::formats;
  const auto load_record = [](const std::string& key, uint64_t bytes) {
    if (bytes > (1u << 20)) throw FormatError("storage '" + key + "' is larger than this harness serves");
    return at::zeros({static_cast<int64_t>(bytes)}, at::kByte);
  };
  try {
    for (const auto& [name, tensor] :
         unpickle_state_dict(std::string(reinterpret_cast<const char*>(data), size), load_record, "data.pkl")) {
      if (tensor.numel() == 0) continue;
      // The view's last element must lie inside its storage; reading it
      // here (instrumented code) also lets the sanitizer check the memory.
      int64_t last = tensor.storage_offset();
      for (int64_t d = 0; d < tensor.dim(); ++d) last += (tensor.size(d) - 1) * tensor.stride(d);
      const auto end = static_cast<uint64_t>(last + 1) * tensor.element_size();
      if (end > tensor.storage().nbytes()) std::abort();
      const auto* bytes = static_cast<const volatile uint8_t*>(tensor.storage().data());
      (void)bytes[end - 1];
    }
  } catch (const FormatError&) {
  }
  return 0;
}
