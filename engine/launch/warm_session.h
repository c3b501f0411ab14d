// What `accel-run --watch` and `accel-run repl` share: warm workers
// (warm_protocol.h) driven by a controller on a thread of its own, beside
// the supervisor's loop, for as long as one set of workers lives; and a
// session that outlives the sets (a crashed worker is replaced by a new
// set, and the session goes on).
#pragma once
#include <unistd.h>

#include <cerrno>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/protocol/warm_protocol.h"

namespace accel {

class LiveChannel;

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
  // local rank's control socket (it owns them) and where their runs take
  // control chunks (null when they take none: not node 0).
  virtual std::unique_ptr<WarmController> start(std::vector<int> sockets, int out_fd, const LiveChannel* live) = 0;
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

// A warm worker's end of its control socket, as a controller sees it.
struct WarmRank {
  int fd = -1;
  bool open = true;
  bool ready = false;
  WarmFrameReader reader;
  std::optional<WarmMessage> outcome;  // of the run in progress
};

// What `read_warm_rank` found: whether the worker reported a failure, and
// why the workers must stop (the worker exited, or sent what cannot be
// read), if they must.
struct WarmRead {
  bool failed = false;
  std::optional<std::string> stop;
};

// Reads what local rank `r`'s worker sent: `ready` marks it ready, any
// other message is its run's outcome.
inline WarmRead read_warm_rank(WarmRank& rank, size_t r) {
  WarmRead read;
  char buffer[4096];
  const ssize_t n = ::read(rank.fd, buffer, sizeof buffer);
  if (n < 0 && errno == EINTR) return read;
  if (n <= 0) {
    // The supervisor reports a worker that failed; one that exited 0
    // (os.exit) it would let be, so it is replaced here.
    rank.open = false;
    read.stop = "rank " + std::to_string(r) + "'s worker exited";
    return read;
  }
  rank.reader.feed(buffer, static_cast<size_t>(n));
  try {
    while (std::optional<WarmMessage> message = rank.reader.next_message()) {
      if (message->kind == WarmMessage::Kind::ready) {
        rank.ready = true;
        continue;
      }
      if (message->kind == WarmMessage::Kind::failed) read.failed = true;
      rank.outcome = std::move(message);
    }
  } catch (const std::exception& error) {
    rank.open = false;
    read.stop = "rank " + std::to_string(r) + ": " + error.what();
  }
  return read;
}

}  // namespace accel
