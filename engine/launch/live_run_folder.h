// A live run's folder: where `accel-run attach` and `accel-run ctl` find a
// training run to steer (docs/live-runs.md). Every run a launcher hosts the
// store for gets one, under the user's folder of live runs
// ($XDG_RUNTIME_DIR/accel-runs, else /tmp/accel-runs-<uid>; mode 0700,
// owned by the user, else refused): <id>/ (mode 0700) holding
//   run      "pid <launcher pid>\ncwd <folder it started in>\nrecipe <path>\n"
//            "kind run" or "kind serve" (accel-run serve: submit finds it)
//   secret   the run's store token (mode 0600): a client must present it
//   control.sock   the control socket (mode 0600; live_control_server.h)
//   control.log    every change applied, one JSON line each
// The folder goes when the launcher ends; a launcher killed outright leaves
// one whose pid is gone, which lookups skip and the next launch removes.
#pragma once
#include <string>
#include <vector>

namespace accel {

// The user's folder of live runs, made when missing. Throws
// std::runtime_error when it exists but is another user's or open to others.
std::string live_runs_directory();

struct LiveRunEntry {
  std::string id;
  std::string folder;
  int pid = 0;
  std::string cwd;
  std::string recipe;
  std::string kind = "run";  // run, or serve
};

// Live runs of this user whose launcher is still alive (folders of dead
// ones are removed as they are seen).
std::vector<LiveRunEntry> live_runs();

// The run `id`, or with an empty id the one live run started from `cwd`,
// of `kind` (run, or serve). Throws std::runtime_error saying why there is
// none or which ids match.
LiveRunEntry find_live_run(const std::string& id, const std::string& cwd, const std::string& kind = "run");

class LiveRunFolder {
 public:
  // Makes <live runs>/<new id>/ with its `run` and `secret` files. `cwd`:
  // the folder the run was started from (a served run's is its
  // submitter's); empty, the launcher's.
  LiveRunFolder(const std::string& secret, const std::string& recipe, const std::string& kind = "run",
                const std::string& cwd = "");
  ~LiveRunFolder();  // removes the folder
  LiveRunFolder(const LiveRunFolder&) = delete;
  LiveRunFolder& operator=(const LiveRunFolder&) = delete;

  const std::string& id() const { return id_; }
  const std::string& path() const { return path_; }
  std::string socket_path() const { return path_ + "/control.sock"; }
  std::string log_path() const { return path_ + "/control.log"; }

 private:
  std::string id_;
  std::string path_;
};

}  // namespace accel
