// The store keys through which a launcher hands `accel-run ctl` chunks to a
// run's ranks and collects what they did (docs/live-runs.md). The workers'
// side is lua/accel/live/control.lua, which spells the same keys.
//
//   live/on            "1": this run takes control chunks
//   live/logs          the files every applied change is appended to, one a line
//   live/posted        the number of the newest chunk posted (1, 2, ...)
//   live/cmd/<n>       chunk n's text
//   live/at/<n>        the step at whose boundary chunk n runs (rank 0 decides)
//   live/ran/<n>/<r>   "ok" or "failed": whether rank r ran it without error
//   live/result/<n>/<r>  "<applied|rejected|failed> <step>\n<text>": its outcome
//   live/status/<r>    rank r's newest status line
#pragma once
#include <string>

namespace accel::live_keys {

inline const char* const kOn = "live/on";
inline const char* const kLogs = "live/logs";
inline const char* const kPosted = "live/posted";
inline std::string command(int64_t n) { return "live/cmd/" + std::to_string(n); }
inline std::string result(int64_t n, int rank) {
  return "live/result/" + std::to_string(n) + "/" + std::to_string(rank);
}
inline std::string status(int rank) { return "live/status/" + std::to_string(rank); }

}  // namespace accel::live_keys
