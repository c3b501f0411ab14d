// The store keys through which a launcher hands `accel-run ctl` chunks to a
// run's ranks and collects what they did (docs/live-runs.md). The workers'
// side is lua/accel/live/control.lua, which spells the same keys.
//
//   live/run           the number of the run taking chunks now, or "" when
//                      none does: the keys below are under live/<run>/
//   logs               the files every applied change is appended to, one a line
//   posted             the number of the newest chunk posted (1, 2, ...)
//   cmd/<n>            chunk n's text
//   at/<n>             the step at whose boundary chunk n runs (rank 0 decides)
//   ran/<n>/<r>        "ok" or "failed": whether rank r ran it without error
//   result/<n>/<r>     "<applied|rejected|failed> <step>\n<text>": its outcome
//   status/<r>         rank r's newest status line
//
// Note [one store, many runs]: warm workers (--watch, repl, serve) keep
// one store for every run they make, and each run's Lua state starts
// counting chunks from 1; a run's keys under a number of its own keep a
// new run from taking the chunks, or showing the status, of the one before.
#pragma once
#include <string>

namespace accel::live_keys {

inline const char* const kRun = "live/run";

class RunKeys {
 public:
  explicit RunKeys(int run) : prefix_("live/" + std::to_string(run) + "/") {}
  std::string logs() const { return prefix_ + "logs"; }
  std::string posted() const { return prefix_ + "posted"; }
  std::string command(int64_t n) const { return prefix_ + "cmd/" + std::to_string(n); }
  std::string result(int64_t n, int rank) const {
    return prefix_ + "result/" + std::to_string(n) + "/" + std::to_string(rank);
  }
  std::string status(int rank) const { return prefix_ + "status/" + std::to_string(rank); }

 private:
  std::string prefix_;
};

}  // namespace accel::live_keys
