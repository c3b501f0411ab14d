// Reports a stalled collective while it stalls, as Horovod's stall
// inspector does: when some ranks have waited in a collective longer than
// the threshold, which ranks wait in which operation at which recipe line,
// and where each rank that has not arrived is instead. The launcher feeds it
// the ranks' published states (collective_state.h) about once a second.
//
// Times are the launcher's own: a rank counts as waiting since the launcher
// first saw it in that collective, so clocks of other machines do not matter.
#pragma once
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "engine/launch/collective_state.h"

namespace accel {

class StallInspector {
 public:
  using Clock = std::chrono::steady_clock;

  StallInspector(int world_size, std::chrono::milliseconds threshold);

  // Takes every rank's state now (nothing: the rank has published none) and
  // returns the report to print, or "" when there is nothing new to say. A
  // stall is reported when it passes the threshold and again each further
  // threshold while it lasts.
  std::string observe(const std::vector<std::optional<CollectiveState>>& states,
                      Clock::time_point now);

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
