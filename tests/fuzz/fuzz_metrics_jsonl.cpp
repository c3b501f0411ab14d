// Feeds the input to accel-run plot's reader as a run's metrics.jsonl
// (read_run_metrics), then writes the gnuplot script for every metric read
// (at most 36, as plot draws). Finding: anything but a PlotError escaping,
// a crash, a sanitizer report, a hang or a leak; also a name whose gnuplot
// string is not single-quoted literals joined by sprintf('%c', 39) with no
// quote, newline or other control character inside a literal (one would let
// a name end its literal and become gnuplot code).
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/launch/gnuplot_script.h"
#include "engine/launch/run_metrics.h"
#include "tests/fuzz/scratch_file.h"

namespace {

// Whether `quoted` is ('literal' . sprintf('%c', 39) . 'literal' ...) with
// literals free of quotes and control characters.
bool only_literals(const std::string& quoted) {
  static const std::string kJoin = "' . sprintf('%c', 39) . '";
  if (quoted.size() < 4 || quoted.compare(0, 2, "('") != 0 || quoted.compare(quoted.size() - 2, 2, "')") != 0) {
    return false;
  }
  const std::string inner = quoted.substr(2, quoted.size() - 4);
  for (size_t i = 0; i < inner.size();) {
    if (inner.compare(i, kJoin.size(), kJoin) == 0) {
      i += kJoin.size();
      continue;
    }
    const auto c = static_cast<unsigned char>(inner[i]);
    if (c == '\'' || c < 0x20 || c == 0x7f) return false;
    ++i;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = accel::fuzz::write_scratch("metrics.jsonl", data, size);
  try {
    const accel::plot::RunMetrics run = accel::plot::read_run_metrics(path);
    std::vector<std::string> metrics;
    for (const auto& [name, points] : run.series) {
      if (!only_literals(accel::plot::gnuplot_string(name))) std::abort();
      if (metrics.size() < 36) metrics.push_back(name);
    }
    if (!metrics.empty()) accel::plot::gnuplot_script(accel::plot::Chart{}, metrics, {run});
  } catch (const accel::plot::PlotError&) {
  }
  return 0;
}
