// What `accel-run --watch` and `accel-run repl` share: warm workers
// (warm_protocol.h) driven by a controller on a thread of its own, beside
// the supervisor's loop, for as long as one set of workers lives; and a
// session that outlives the sets (a crashed worker is replaced by a new
// set, and the session goes on).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace accel {

class WarmController {
 public:
  struct Stop {
    std::string reason;
  };
  virtual ~WarmController() = default;
  // Set once the workers must be stopped (replaced, unless the session is
  // over). Safe from any thread.
  virtual std::optional<Stop> stop() const = 0;
  // The launcher got SIGINT; called on the supervising thread. True when
  // the controller takes care of it (the workers go on); false lets the
  // supervisor stop them as usual.
  virtual bool interrupt() { return false; }
  // The local ranks that finished what they were given (a REPL chunk) while
  // others still work on it: a collective the others wait in, later than an
  // idle rank's last, is one it never enters (stall_inspector.h).
  virtual std::vector<int> idle_ranks() const { return {}; }
  // Ends the controller's thread and closes its sockets; called once the
  // workers have ended.
  virtual void finish() = 0;
};

class WarmSession {
 public:
  virtual ~WarmSession() = default;
  // A controller for a new set of workers, given the launcher's end of each
  // local rank's control socket (it owns them).
  virtual std::unique_ptr<WarmController> start(std::vector<int> sockets, int out_fd) = 0;
  // The user has left: no new workers.
  virtual bool over() const { return false; }
  // Whether the first local rank reads the launcher's stdin (the REPL keeps
  // the terminal to itself).
  virtual bool stdin_to_workers() const { return true; }
  // A set of workers has ended with `exit_code` (the culprit's) and the
  // launcher's `report` of it: a serve hands both to the run they ended in.
  virtual void workers_ended(int /*exit_code*/, const std::string& /*report*/) {}
  // Runs or chunks the workers were given so far: a set of workers that
  // ends before serving any is not replaced, since the next would end so too.
  int served = 0;
};

}  // namespace accel
