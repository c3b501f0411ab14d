// Starting the workers of a run and watching them until the last one ends.
//
// Each worker is a child process with the torchrun environment (RANK,
// LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) plus
// ACCEL_ROLE=worker, ACCEL_THREADS and ACCEL_ERROR_FILE (a file in a private
// run directory, removed at the end). On a machine that is one node of
// several, ranks are global: RANK = rank_offset + LOCAL_RANK. Workers die
// with the launcher (they get SIGKILL when it dies, however it dies). Each
// leads a session of its own, as torchrun's workers do: stopping a worker signals its process group,
// so the processes it started stop too (and once a stopped worker has
// ended, whatever it left in its group gets SIGKILL), and terminal job
// control never stops a worker (the launcher handles the terminal's signals
// and forwards them).
//
// Rank 0 writes straight to the launcher's stdout and stderr; the other
// ranks' lines are relayed with a "[rank N] " prefix (see OutputRelay). With
// a log directory, every rank is relayed (rank 0 without a prefix) and its
// lines are also appended to log_dir/rank-N.log, followed by the error that
// ended it, if it recorded one.
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
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/launch/failure_report.h"
#include "engine/launch/run_guardian.h"

namespace accel {

// What every worker runs; the launcher runs itself, tests run shell scripts.
struct WorkerCommand {
  std::string program;            // path given to execve()
  std::vector<std::string> argv;  // argv[0] included
  std::vector<std::string> env;   // "NAME=value"; the launch variables override these
};

// What a tick sees of the run.
struct SupervisorTick {
  bool stopping = false;           // the workers are being stopped
  std::optional<int> failed_rank;  // the first rank seen failing, if one did
  std::vector<int> stopped_ranks;  // running ranks whose processes are stopped (SIGSTOP, a debugger)
};

struct SupervisorOptions {
  WorkerCommand command;
  int nproc = 1;
  int rank_offset = 0;  // the global rank of this machine's first worker
  int world_size = 0;   // ranks on every machine together; 0: nproc
  // False for a single child that starts the ranks itself (mpirun): it and
  // its ranks must not see RANK, LOCAL_RANK, WORLD_SIZE or LOCAL_WORLD_SIZE.
  bool rank_variables = true;
  int threads = 1;  // intra-op threads per rank, passed as ACCEL_THREADS
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // the port the rendezvous store listens on
  std::chrono::milliseconds grace_period{5000};  // from SIGTERM to SIGKILL
  // Where rank 0 writes directly and where other ranks' lines are relayed.
  int stdout_fd = STDOUT_FILENO;
  int stderr_fd = STDERR_FILENO;
  // When set, each rank's output is also appended to log_dir/rank-N.log (the
  // directory is created).
  std::string log_dir;
  // Called on the supervising thread about every tick_interval while workers
  // run (stall reports, news from other nodes), and at once when stopping
  // begins. A returned reason stops the workers as a failure would, and the
  // report gives the reason.
  std::function<std::optional<std::string>(const SupervisorTick&)> on_tick;
  std::chrono::milliseconds tick_interval{1000};
  // Told each worker's process group, to end them should the launcher die
  // (run_guardian.h); none: only the launcher ends them.
  RunGuardian* guardian = nullptr;
  // Empty, or one descriptor per local rank that the worker inherits as
  // kControlFd (warm_protocol.h: `accel-run --watch` talks to it there).
  // supervise() owns them: it closes each once its worker is started, so
  // the other end sees the worker go, and all of them should it fail.
  std::vector<int> control_fds;
  // Whether the first local rank reads the launcher's stdin (else /dev/null).
  bool stdin_to_first_rank = true;
  // Asked, on the supervising thread, when the launcher gets SIGINT before
  // any stop: true when the caller has dealt with it (accel-run repl
  // interrupts the chunk running), and the workers go on.
  std::function<bool()> on_interrupt;
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
// other. A worker killed by a SIGKILL the launcher did not send is checked
// against the memory cgroup's out-of-memory kill count. Throws
// std::invalid_argument when nproc is below 1, and std::runtime_error naming
// the step when the run cannot be set up (no run directory, no log file, no
// pipes, fork failing), after stopping any workers already started.
// Installs its own handlers for SIGCHLD, SIGINT, SIGTERM and SIGHUP and
// ignores SIGPIPE while it runs, restoring the previous ones on return, so
// only one supervise() may run at a time in a process (a second throws
// std::logic_error). Call it from a thread that outlives the call: workers
// die with the thread that forked them.
SupervisorResult supervise(const SupervisorOptions& options);

}  // namespace accel
