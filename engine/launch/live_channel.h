// Where the runs of one set of workers take control chunks (docs/live-runs.md):
// the round's store, and the live folder `accel-run attach` and `ctl` find
// them by. A cold run (and each of its restarts), the --watch session's
// reruns and the REPL use the session's folder, so the id printed at the
// start stays the run's; a served run gets a folder of its own, started
// from its submitter's folder, so `accel-run ctl` there finds it as it
// would a cold run. Each run has a control server of its own (Note [one
// store, many runs] in engine/protocol/live_control_keys.h).
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "engine/launch/live_control_server.h"
#include "engine/launch/live_run_folder.h"
#include "engine/protocol/store_connection.h"

namespace accel {

// One run's control: its folder (when its own) and its server.
class LiveRun {
 public:
  LiveRun(std::unique_ptr<LiveRunFolder> own_folder, const LiveRunFolder& folder, StoreAddress store,
          int world_size, std::vector<std::string> logs, int number);
  const std::string& id() const { return id_; }

 private:
  std::unique_ptr<LiveRunFolder> own_folder_;  // destroyed after the server, which listens in it
  std::string id_;
  LiveControlServer server_;
};

class LiveChannel {
 public:
  // `folder`: the session's, or null to give each run its own (serve).
  // `log_dir`: --log-dir, where control.log also gets every change.
  LiveChannel(StoreAddress store, int world_size, std::string log_dir, const LiveRunFolder* folder);

  // Run `number` of the store (1, 2, ... in the order the runs start):
  // `recipe` and `cwd` name it in a folder of its own. When its folder or
  // socket cannot be made, the run goes on without: null, and a warning
  // saying why on `warn_fd`.
  std::unique_ptr<LiveRun> open(int number, const std::string& recipe, const std::string& cwd, int warn_fd) const;

 private:
  StoreAddress store_;
  int world_size_;
  std::string log_dir_;
  const LiveRunFolder* folder_;
};

}  // namespace accel
