// Feeds the input to parse_manifest as a checkpoint's manifest.json (through
// parse_json: size and depth bounds, repeated keys, UTF-8), then writes the
// parsed manifest back and parses that again.
// Finding: anything but a FormatError escaping, a crash, a sanitizer
// report, a hang or a leak; also an accepted manifest whose own rewrite is
// refused or reads back differently.
#include <cstdlib>

#include "engine/formats/format_error.h"
#include "engine/formats/manifest.h"

namespace {

bool same(const accel::formats::Manifest& a, const accel::formats::Manifest& b) {
  if (a.format_version != b.format_version || a.step != b.step || a.iteration != b.iteration ||
      a.world_size != b.world_size || a.files.size() != b.files.size())
    return false;
  for (size_t i = 0; i < a.files.size(); ++i) {
    const auto& x = a.files[i];
    const auto& y = b.files[i];
    if (x.name != y.name || x.format != y.format || x.digest.size != y.digest.size || x.digest.crc32c != y.digest.crc32c)
      return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace accel::formats;
  Manifest manifest;
  try {
    manifest = parse_manifest(std::string(reinterpret_cast<const char*>(data), size), "manifest.json");
  } catch (const FormatError&) {
    return 0;
  }
  // What the engine accepted it must be able to write again, identically.
  if (!same(manifest, parse_manifest(manifest_to_json(manifest), "rewritten manifest.json"))) std::abort();
  return 0;
}
