// A run's scalars as accel-run plot reads them from <run dir>/metrics.jsonl
// (engine/tracking/jsonl_tracker.h writes it): one series of (step, value)
// points per metric. A run still being written can be read: its last line,
// when the newline has not arrived yet, is left for the next read.
#pragma once
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace accel::plot {

struct RunMetrics {
  std::string name;  // how the legend names the run: its folder as given
  std::map<std::string, std::vector<std::pair<double, double>>> series;  // metric -> (step, value)
  // Values the tracker wrote as "NaN", "Infinity" or "-Infinity" (a loss
  // that diverged): kept in the series as NaN, drawn as gaps, and counted
  // here so that plot can say so.
  struct NonFinite {
    size_t count = 0;
    double first_step = 0;
  };
  std::map<std::string, NonFinite> non_finite;  // metric -> its values that are not finite
};

class PlotError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Reads `run` (a run folder holding metrics.jsonl, or such a file itself).
// Lines that are not JSON objects with a numeric "step" are errors naming
// the file and line; "NaN", "Infinity" and "-Infinity" are points that are
// not finite (non_finite); other values that are not numbers (strings)
// are left out of the series.
RunMetrics read_run_metrics(const std::string& run);

}  // namespace accel::plot
