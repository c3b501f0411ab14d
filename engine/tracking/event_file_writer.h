// The tensorboard tracker: TensorBoard's event file,
//   <run dir>/events.out.tfevents.<seconds>.<host>.<pid>.<n>
// (n counts the files this process opened), as TensorBoard's own writers
// make it: a first event with the file version, then one event per log call
// holding its scalars (simple_value summaries), the configuration as the
// hparams plugin's session_start_info, and at close the session's end with
// its status. Records are framed by record_framing.h; events are encoded by
// protobuf_wire.h with TensorBoard's field numbers.
#pragma once
#include <string>

#include "engine/tracking/tracker.h"

namespace accel::tracking {

class EventFileWriter final : public Tracker {
 public:
  // Creates `run_dir` (and its parents) when missing and writes the file's
  // first event.
  EventFileWriter(const std::string& run_dir, double flush_seconds);

  void log(int64_t step, const Scalars& values) override;
  void log_config(const Config& config) override;
  // Records the session's end (success or failure) when a configuration
  // started one, then closes.
  void close(RunOutcome outcome) override;

 private:
  void write_event(const std::string& serialized);

  bool session_started_ = false;
  std::string record_;  // reused between calls
};

}  // namespace accel::tracking
