// Feeds the input to load_weights as model.safetensors.index.json, in a
// folder that also holds two real shards (written once, by the engine):
// model-00001-of-00002.safetensors with tensors a and b, and
// model-00002-of-00002.safetensors with c. So the index's JSON, its
// weight_map and the way it is matched against the shards are all reached.
// Finding: anything but a FormatError escaping, a crash, a sanitizer
// report, a hang or a leak; also an index that loads a tensor the index
// does not name, or a tensor twice.
#include <ATen/ATen.h>

#include <cstdlib>
#include <set>

#include "engine/formats/format_error.h"
#include "engine/formats/weights_export.h"
#include "tests/fuzz/scratch_file.h"

namespace {

const std::string& weights_folder() {
  static const std::string folder = [] {
    using namespace accel::formats;
    const std::string f = accel::fuzz::scratch_folder();
    write_safetensors(f + "/model-00001-of-00002.safetensors",
                      {{"a", at::arange(6, at::kFloat).reshape({2, 3})}, {"b", at::ones({4}, at::kLong)}});
    write_safetensors(f + "/model-00002-of-00002.safetensors", {{"c", at::zeros({}, at::kDouble)}});
    return f;
  }();
  return folder;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace accel::formats;
  const std::string& folder = weights_folder();
  accel::fuzz::write_scratch("model.safetensors.index.json", data, size);
  try {
    std::set<std::string> seen;
    for (const auto& [name, tensor] : load_weights(folder)) {
      if ((name != "a" && name != "b" && name != "c") || !seen.insert(name).second) std::abort();
    }
  } catch (const FormatError&) {
  }
  return 0;
}
