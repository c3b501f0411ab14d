// Starting the workers of a run and watching them until the last one ends.
//
// Each worker is a child process with the torchrun environment (RANK,
// LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) plus
// ACCEL_ROLE=worker, ACCEL_THREADS and ACCEL_ERROR_FILE (a file in a private
// run directory, removed at the end). Workers die with the launcher (they
// get SIGKILL when it dies, however it dies) and each leads its own process
// group, so stopping a worker also stops the processes it started.
//
// Rank 0 writes straight to the launcher's stdout and stderr; the other
// ranks' lines are relayed with a "[rank N] " prefix (see OutputRelay).
//
// When a worker fails (non-zero exit or a signal) the others get SIGTERM, and
// SIGKILL after the grace period. SIGINT, SIGTERM and SIGHUP sent to the
// launcher are forwarded to every worker, followed by the same grace period;
// a second one sends SIGKILL at once. One the launcher was started ignoring
// (nohup's SIGHUP, a shell's SIGINT for background jobs) stays ignored, by
// the workers too. Every worker is reaped before supervise() returns.
#pragma once
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "engine/launch/failure_report.h"

namespace accel {

// What every worker runs; the launcher runs itself, tests run shell scripts.
struct WorkerCommand {
  std::string program;            // path given to execve()
  std::vector<std::string> argv;  // argv[0] included
  std::vector<std::string> env;   // "NAME=value"; the launch variables override these
};

struct SupervisorOptions {
  WorkerCommand command;
  int nproc = 1;
  int threads = 1;  // intra-op threads per rank, passed as ACCEL_THREADS
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // the port the rendezvous store listens on
  std::chrono::milliseconds grace_period{5000};  // from SIGTERM to SIGKILL
  // Where rank 0 writes directly and where other ranks' lines are relayed.
  int stdout_fd = STDOUT_FILENO;
  int stderr_fd = STDERR_FILENO;
};

struct SupervisorResult {
  std::vector<RankExit> exits;    // one per rank, in rank order
  std::optional<StopCause> stop;  // set when the launcher had to stop workers
  Verdict verdict;
  std::string report;  // failure_report(): what the launcher prints on stderr
  int exit_code = 0;   // what the launcher exits with (Verdict::exit_code)
};

// Runs the workers until all have ended. A worker that cannot be executed
// exits 127 with the reason in its error file, and counts as failed like any
// other. Throws std::runtime_error naming the step when the run cannot be set
// up (no run directory, no pipes, fork failing), after stopping any workers
// already started. Installs its own handlers for SIGCHLD, SIGINT, SIGTERM and
// SIGHUP and ignores SIGPIPE while it runs, restoring the previous ones on
// return, so only one supervise() may run at a time in a process (a second
// throws std::logic_error); it must be
// called from a thread that outlives the call (workers die with the thread
// that forked them).
SupervisorResult supervise(const SupervisorOptions& options);

}  // namespace accel
