// The launcher's side of `accel-run serve` while one set of warm workers
// lives (serve_session.h): when every worker is ready and no run is going,
// it starts the next submitted run on every rank, relays the output of the
// ranks after the first to the submitter, and once every rank has given
// its outcome tells the submitter the exit status (0, or 1 with each
// failed rank's error). It stops the workers (stop()) when they can no
// longer serve: ranks out of step after a failure (one still waits in a
// collective failure_grace after another failed, or they ran different
// numbers of collectives), a worker that ended, or a submitter that left
// mid-run.
#pragma once
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/launch/live_channel.h"
#include "engine/launch/output_relay.h"
#include "engine/launch/warm_session.h"
#include "engine/protocol/warm_protocol.h"

namespace accel {

class ServeSession;
struct ServedRun;

class ServeController final : public WarmController {
 public:
  // `live`: where each run takes control chunks (a live folder of its own,
  // from its submitter's folder); null for none.
  ServeController(ServeSession& session, std::vector<int> sockets, int out_fd, const LiveChannel* live);
  ~ServeController() override;  // finish()
  ServeController(const ServeController&) = delete;
  ServeController& operator=(const ServeController&) = delete;

  std::optional<Stop> stop() const override;
  void finish() override;

 private:
  using Clock = std::chrono::steady_clock;
  using Rank = WarmRank;

  void serve();
  void read_rank(size_t r);
  void start_run(ServedRun& run);
  void conclude_run(bool everyone);
  void request_stop(const std::string& reason);

  ServeSession& session_;
  int out_fd_;
  const LiveChannel* live_;
  // How long after one rank's failure the others may take to report theirs
  // before they are taken to be stuck waiting for it.
  std::chrono::milliseconds failure_grace_{2000};
  int wake_read_ = -1;
  int wake_write_ = -1;
  std::thread thread_;
  mutable std::mutex mutex_;
  std::optional<Stop> stop_;

  // Owned by the thread.
  std::vector<Rank> ranks_;
  ServedRun* running_ = nullptr;
  int number_ = 0;  // the run's, as the serve counts them
  std::vector<OutputRelay> relays_;  // the running run's ranks after the first
  std::unique_ptr<LiveRun> control_;  // the running run's
  std::optional<Clock::time_point> first_failure_;
  size_t culprit_ = 0;
};

}  // namespace accel
