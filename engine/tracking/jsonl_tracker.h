// The jsonl tracker: <run dir>/metrics.jsonl, one JSON object per log call,
//   {"step": 12, "time": 1732435200.25, "loss": 0.41, "lr": 0.001}
// (time in seconds since the epoch; "step" and "time" are therefore not
// metric names), and the run's configuration in <run dir>/config.json.
// Lines are appended, so a file being written can be read (and plotted) at
// any moment: every complete line is a whole record.
#pragma once
#include <string>

#include "engine/tracking/tracker.h"

namespace accel::tracking {

class JsonlTracker final : public Tracker {
 public:
  // Creates `run_dir` (and its parents) when missing.
  JsonlTracker(const std::string& run_dir, double flush_seconds);

  void log(int64_t step, const Scalars& values) override;
  void log_config(const Config& config) override;
  void close(RunOutcome outcome) override;

 private:
  std::string run_dir_;
  std::string line_;  // reused, so a log call allocates nothing once warm
};

}  // namespace accel::tracking
