// `accel-run serve`: warm workers (warm_session.h) that run the recipes
// sent to them, one after another. The serve listens on its live folder's
// socket (live_run_folder.h, control_socket.h: owner only, the secret on
// the first line); `accel-run submit` sends one "submit" frame holding a
// RunRequest (warm_protocol.h) with its stdout and stderr attached
// (fd_passing.h), and gets one message back once the run is over:
// "ok <exit code> 0\n". The run writes to the submitter's streams itself
// (rank 0 straight, the others through the serve with the "[rank N] "
// prefix, as a cold run's launcher relays them), so nothing of its output
// waits for the serve.
//
// Each run is the warm worker's (warm_worker.h): a new Lua state in a
// reset process, in the folder it was submitted from; what from_pretrained
// loaded stays in memory for the next (engine/formats/kept_weights.h). A
// run that fails leaves the workers serving when the ranks are still in
// step; a rank that dies, ranks out of step, or a submitter that leaves
// mid-run (Ctrl-C) get new workers, and the queue goes on.
#pragma once
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/launch/warm_session.h"
#include "engine/protocol/warm_protocol.h"

namespace accel {

// One submitted recipe and where its run reports.
struct ServedRun {
  int client = -1;  // the submitter's connection
  int out = -1;     // its stdout and stderr
  int err = -1;
  RunRequest request;
  ServedRun() = default;
  ~ServedRun();  // closes them
  ServedRun(const ServedRun&) = delete;
  ServedRun& operator=(const ServedRun&) = delete;
  // Tells the submitter the run is over with `exit_code`.
  void finish(int exit_code);
  // Whether the submitter has gone (its connection closed).
  bool gone() const;
};

class ServeSession final : public WarmSession {
 public:
  // Listens on `socket_path` for submitters presenting `secret`.
  ServeSession(std::string socket_path, std::string secret);
  ~ServeSession() override;  // stops listening; tells those queued the serve stopped
  ServeSession(const ServeSession&) = delete;
  ServeSession& operator=(const ServeSession&) = delete;

  std::unique_ptr<WarmController> start(std::vector<int> sockets, int out_fd, const LiveChannel* live) override;
  bool stdin_to_workers() const override { return false; }
  void workers_ended(int exit_code, const std::string& report) override;

  // For the controller: readable while runs wait (an eventfd).
  int queued_fd() const { return queued_fd_; }
  // The next run to start, made the current one; null when none waits.
  ServedRun* begin_next();
  // The current run is over: the submitter is told `exit_code`.
  void end_current(int exit_code);

 private:
  void accept_loop();
  void take(int fd);

  std::string socket_path_;
  std::string secret_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;    // an eventfd: written once to stop the acceptor
  int queued_fd_ = -1;  // an eventfd, written for each run queued
  std::mutex mutex_;
  std::deque<std::unique_ptr<ServedRun>> queue_;
  std::unique_ptr<ServedRun> current_;
  std::thread acceptor_;
};

}  // namespace accel
