// Reports a stalled collective while it stalls, as Horovod's stall
// inspector does: when some ranks have waited in a collective longer than
// the threshold, which ranks wait in which operation at which recipe line,
// and where each rank that has not arrived is instead. The launcher feeds it
// the ranks' published states (collective_state.h) about once a second.
//
// Times are the launcher's own: a rank counts as waiting since the launcher
// first saw it in that collective, so clocks of other machines do not matter.
//
// A state is what the rank last published, which may be a moment old, and
// stays as it was when the rank's process is stopped. So the stalled
// collective is the latest any rank waits in: a rank shown inside an earlier
// one has in fact passed it (its peers could not have left it without it),
// or is stuck there, and either way is the one not arriving.
#pragma once
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "engine/protocol/collective_state.h"

namespace accel {

class StallInspector {
 public:
  using Clock = std::chrono::steady_clock;

  StallInspector(int world_size, std::chrono::milliseconds threshold);

  // Takes every rank's state now (nothing: the rank has published none) and
  // returns the report to print, or "" when there is nothing new to say. A
  // stall is reported when it passes the threshold and again each further
  // threshold while it lasts. `stopped` lists ranks whose processes the
  // launcher sees stopped (SIGSTOP, a debugger): the report says so.
  std::string observe(const std::vector<std::optional<CollectiveState>>& states,
                      Clock::time_point now, const std::vector<int>& stopped = {});

  // A rank that finished its recipe while another waits in a collective the
  // finished one never entered: the run cannot go on, whatever the time.
  // "rank 1 finished its recipe while rank 0 waits in all_reduce #7 at
  // x.lua:9"; nothing when no rank is in that state. `idle` are ranks that
  // finished a REPL chunk and wait for the next (a rank waiting in a
  // collective later than an idle rank's last waits for nothing).
  static std::optional<std::string> abandoned(const std::vector<std::optional<CollectiveState>>& states,
                                              const std::vector<int>& idle = {});

 private:
  struct Seen {
    std::optional<CollectiveState> state;
    Clock::time_point since;
  };
  std::chrono::milliseconds threshold_;
  std::vector<Seen> seen_;
  std::optional<CollectiveState> reported_;  // the stalled collective last reported
  Clock::time_point reported_at_;
};

}  // namespace accel
