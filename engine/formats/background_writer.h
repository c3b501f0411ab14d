// The writing half of an asynchronous checkpoint (acc:save_state(dir,
// {async = true}), docs/live-runs.md): the steps a save queued (write this
// file from host memory, wait for the other ranks' files, write the
// manifest, rename the folder into place) run in order on a thread of their
// own while training goes on, at the pace start() was given (write_pace.h).
// One batch at a time: start() waits for the one before. A step that
// throws ends the batch; wait() rethrows it.
#pragma once
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/formats/write_pace.h"

namespace accel::formats {

class BackgroundWriter {
 public:
  BackgroundWriter() = default;
  ~BackgroundWriter();  // waits for the batch, dropping its error
  BackgroundWriter(const BackgroundWriter&) = delete;
  BackgroundWriter& operator=(const BackgroundWriter&) = delete;

  // A step writes at the pace it is handed.
  using Step = std::function<void(WritePace&)>;

  // Queues a step of the next batch.
  void add(Step step);
  // Waits for the batch in flight (rethrowing its error), then starts the
  // steps queued since, using at most `share` of a core (write_pace.h).
  void start(double share = 1.0);
  // Waits for the batch in flight; rethrows the error of a step that failed.
  void wait();
  // Whether a started batch has ended (wait() would not block).
  bool finished() const;

 private:
  std::vector<Step> queued_;
  std::thread thread_;
  mutable std::mutex mutex_;
  bool running_ = false;
  std::exception_ptr error_;
};

// The background steps' own work: a marker file that says rank `rank`'s
// files are all written and fsynced, and the wait of the main process for
// every rank's (removing them), at most `timeout_ms`.
void write_rank_marker(const std::string& folder, int rank);
void wait_for_rank_markers(const std::string& folder, int world_size, int64_t timeout_ms);

}  // namespace accel::formats
