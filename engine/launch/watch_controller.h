// The launcher's side of `accel-run --watch` while one set of warm workers
// runs: it starts a run on every worker when they are all ready and one is
// due (at the start, or after a save), collects each rank's outcome and
// reports it, and decides when the workers can no longer serve: a save
// during a run (the run is abandoned, and the next workers run at once), or
// a failed run after which the ranks are not in step (some still wait in a
// collective for the failed rank, or they ran different numbers of
// collectives). Then stop() says why, and the caller stops the workers and
// starts new ones.
//
// It works on a thread of its own, beside the supervisor's loop (which
// relays output and reaps workers); the caller polls stop() from the
// supervisor's ticks and calls finish() when the workers have ended.
#pragma once
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/launch/live_channel.h"
#include "engine/launch/source_watcher.h"
#include "engine/launch/warm_session.h"

namespace accel {

// What the session remembers of saves across sets of workers.
struct WatchHistory {
  // The last file that changed during a run, and that run's number.
  std::string during_run_file;
  int during_run = -1;
  // Files that changed during two runs in a row: the recipe's own output;
  // their changes during runs are ignored.
  std::vector<std::string> written_by_runs;
  bool said_lost = false;  // the folder's loss has been reported
  std::string launch_dir;  // the launcher's working directory, by its full path
};

struct WatchControllerOptions {
  SourceWatcher* sources = nullptr;
  WatchHistory* history = nullptr;
  std::vector<int> sockets;  // the launcher's end of each local rank's control socket; owned
  int out_fd = 2;            // where reports and progress lines go
  // A run is due as soon as the workers are ready; finish() leaves here
  // whether one is due for the next workers.
  bool* run_due = nullptr;
  int* runs = nullptr;       // runs started so far, across sets of workers
  const LiveChannel* live = nullptr;  // where each run takes control chunks; null for none
  // Saves closer together than this are one change (an editor writing a
  // file in several steps, or several files saved at once).
  std::chrono::milliseconds debounce{30};
  // How long after one rank's failure the others may take to report theirs
  // before they are taken to be stuck waiting for it.
  std::chrono::milliseconds failure_grace{2000};
};

class WatchController final : public WarmController {
 public:
  explicit WatchController(WatchControllerOptions options);
  ~WatchController() override;  // finish()
  WatchController(const WatchController&) = delete;
  WatchController& operator=(const WatchController&) = delete;

  std::optional<Stop> stop() const override;
  void finish() override;

 private:
  void serve();
  void handle_change(const std::string& file, bool during_run);
  bool check_folder();
  void start_run();
  void conclude_run(bool everyone);
  void request_stop(const std::string& reason);
  void say(const std::string& text) const;

  WatchControllerOptions options_;
  int wake_read_ = -1;
  int wake_write_ = -1;
  std::thread thread_;
  mutable std::mutex mutex_;
  std::optional<Stop> stop_;

  // Owned by the thread.
  using Rank = WarmRank;
  std::vector<Rank> ranks_;
  bool pending_ = false;
  bool running_ = false;
  std::string changed_file_;
  std::chrono::steady_clock::time_point started_{};
  std::optional<std::chrono::steady_clock::time_point> first_failure_;
  size_t culprit_ = 0;  // the rank whose failure came first, once first_failure_ is set
  std::unique_ptr<LiveRun> control_;  // the running run's
};

// The --watch session: the recipe's folder watched for saves, and the runs
// counted across sets of workers.
class WatchSession final : public WarmSession {
 public:
  explicit WatchSession(const std::string& recipe);
  std::unique_ptr<WarmController> start(std::vector<int> sockets, int out_fd, const LiveChannel* live) override;

 private:
  WatchSession(const std::string& recipe, const std::string& launch_dir);

  SourceWatcher sources_;
  WatchHistory history_;
  bool run_due_ = true;  // the first workers run the recipe as soon as they are ready
};

}  // namespace accel
