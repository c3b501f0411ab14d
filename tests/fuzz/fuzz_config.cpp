// Feeds the input to read_config_file as accel-run's YAML config file.
// Finding: anything but a ConfigError escaping (yaml-cpp's own exceptions
// must be turned into one naming file and line), a crash, a sanitizer
// report, a hang or a leak; also an accepted file with a key twice in a
// mapping or a key without its line.
#include <cstdlib>
#include <set>

#include "engine/protocol/config_file.h"
#include "tests/fuzz/scratch_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = accel::fuzz::write_scratch("config.yaml", data, size);
  // Each mapping's keys once, each with its line.
  auto check = [](const std::vector<accel::ConfigEntry>& entries, auto& self) -> void {
    std::set<std::string> keys;
    for (const accel::ConfigEntry& entry : entries) {
      if (!keys.insert(entry.key).second || entry.line < 1) std::abort();
      self(entry.entries, self);
    }
  };
  try {
    check(accel::read_config_file(path).entries, check);
  } catch (const accel::ConfigError&) {
  }
  return 0;
}
