// A tracker records a run's scalars and its configuration in files that
// other tools read: metrics.jsonl (jsonl_tracker.h) or TensorBoard's event
// files (event_file_writer.h). The Accelerator's log_with picks them; only
// the main process makes any.
//
// Every tracker buffers what it is given and writes it out every few
// seconds and when closed, so logging a dozen scalars each step costs a few
// microseconds (bench/tracking_cost.lua).
#pragma once
#include <cstdint>
#include <string>

#include "engine/tracking/buffered_file.h"
#include <utility>
#include <variant>
#include <vector>

namespace accel::tracking {

// One log call: names and values, in the order given.
using Scalars = std::vector<std::pair<std::string, double>>;
// A configuration value, as TensorBoard's hparams take them.
using ConfigValue = std::variant<double, bool, std::string>;
using Config = std::vector<std::pair<std::string, ConfigValue>>;

// How a run ended, for trackers that record it (TensorBoard's session status).
enum class RunOutcome { success, failure };

class Tracker {
 public:
  // Opens `path` (buffered_file.h) and registers the tracker with the open
  // trackers (open_trackers.h).
  Tracker(const std::string& path, double flush_seconds);
  virtual ~Tracker();
  Tracker(const Tracker&) = delete;
  Tracker& operator=(const Tracker&) = delete;

  // Names must be valid UTF-8 and not empty; errors name the one at fault.
  virtual void log(int64_t step, const Scalars& values) = 0;
  virtual void log_config(const Config& config) = 0;
  // Flushes, records the outcome and closes; later calls are errors, a
  // second close does nothing.
  virtual void close(RunOutcome outcome) = 0;
  // Writes what is buffered.
  void flush() { file_.flush(); }
  // The file the tracker writes its values to.
  const std::string& path() const { return file_.path(); }

 protected:
  BufferedFile file_;
};

// `run_dir`/`name`, creating `run_dir` (and its parents) when missing.
std::string file_in_run_dir(const std::string& run_dir, const std::string& name);

// Throw std::invalid_argument naming `what` ("metric name", "config key")
// unless `text` is valid UTF-8 (check_name: and not empty): TensorBoard's
// readers refuse other strings, and JSON cannot hold them.
void check_utf8(const std::string& text, const std::string& what);
void check_name(const std::string& name, const std::string& what);

// Throws std::invalid_argument unless `name` can be a run's folder inside
// project_dir (init_trackers joins them): valid UTF-8, no control
// character, not absolute, and no "." or ".." component that would leave
// the folder. The message says which rule, without printing raw bytes.
void check_run_name(const std::string& name);

// Seconds since the epoch, as both formats record wall time.
double wall_time();

}  // namespace accel::tracking
