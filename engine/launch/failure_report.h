// Deciding, after a run, which rank caused a failure and which ranks were
// only stopped because of it, and the report the launcher prints.
//
// When rank 1 dies, rank 0 may notice the dead peer and fail on its own a
// moment later, even before the launcher reaps rank 1, so the order in which
// the launcher reaps ranks does not tell who failed first. A rank's failure
// time is the time of its fatal error record when it wrote one, else the time
// the launcher reaped it; among the ranks that failed before the launcher
// started stopping them, the earliest failure is the culprit. A rank that
// recorded losing a peer (kPeerLostRecord) failed because of another, so it
// is the culprit only when every failed rank lost a peer. Pure functions: no
// processes, no clock.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/protocol/error_file.h"

namespace accel {

// A worker's error text as accel-run shows it (failure reports, --watch,
// the REPL): each line after `prefix`, control bytes (ESC among them; tabs
// stay) as \xNN, each line cut after 400 bytes and the text after 60
// lines, so that a data file's 100 MB cell or a recipe's terminal escapes
// can neither flood nor drive the user's terminal. Ends with a newline
// (nothing for an empty text).
std::string quoted_error_text(const std::string& text, const std::string& prefix);

// How one rank ended, as the launcher saw it.
struct RankExit {
  int rank = 0;
  pid_t pid = 0;
  bool reaped = true;      // false: it survived SIGKILL (stuck in the kernel)
  int exit_code = 0;       // meaningful when signal == 0
  int signal = 0;          // the signal that killed it; 0 when it exited
  bool core_dumped = false;  // the signal left a core dump
  // For a SIGKILL: whether the memory cgroup counted an out-of-memory kill
  // meanwhile; nothing when the system does not say (see oom_kills.h).
  std::optional<bool> oom_killed;
  int64_t reaped_ns = 0;   // CLOCK_REALTIME when the launcher reaped it
  std::optional<ErrorRecord> fatal;  // its last fatal record, if it wrote one
  bool lost_peer = false;  // it wrote a kPeerLostRecord: a collective lost another rank

  bool failed() const { return !reaped || signal != 0 || exit_code != 0; }
  int64_t failure_ns() const { return fatal ? fatal->time_ns : reaped_ns; }
};

// Why the launcher started stopping the workers.
struct StopCause {
  int64_t time_ns = 0;  // CLOCK_REALTIME of the first stop signal sent
  int signal = 0;       // the signal the launcher received, 0 when a rank's failure caused it
  // Set when something outside this launcher's workers asked for the stop,
  // such as another node's failure: "node 1 failed (rank 3 ...)".
  std::string reason;
};

enum class Fate {
  succeeded,   // exited 0 before any stop
  culprit,     // the first rank to fail on its own
  failed_too,  // failed on its own, but after the culprit or because a peer was lost
  stopped,     // ended after the launcher's stop signal, without an earlier failure of its own
};

struct Verdict {
  std::vector<Fate> fates;        // one per RankExit, in the same order
  std::optional<size_t> culprit;  // index into the exits
  // The culprit's exit code or 128 + its signal; else 128 + the launcher's
  // signal when it was interrupted; else 1 when stopped for a reason; else 0.
  int exit_code = 0;
};

// `stop` is empty when the launcher never signalled the workers.
Verdict judge(const std::vector<RankExit>& exits, const std::optional<StopCause>& stop);

// The lines the launcher prints on stderr: the culprit with its exit code or
// signal and its fatal record indented, then one line per other rank that
// failed or was stopped. Empty when every rank succeeded.
std::string failure_report(const std::vector<RankExit>& exits, const Verdict& verdict,
                           const std::optional<StopCause>& stop);

// "SIGKILL" for 9; "signal 77" for a number without a name.
std::string signal_name(int signal);

}  // namespace accel
