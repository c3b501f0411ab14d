// What each rank publishes in the launcher's store about the collective it
// is in, so the launcher can tell, while a collective stalls, who waits
// where and who has not arrived; and a timed-out rank can name the missing.
// One key per rank, overwritten as the rank moves on (a cheap SET, made by a
// background thread in the worker: engine/comm/collective_monitor.h).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace accel {

struct CollectiveState {
  int64_t seq = 0;      // collectives entered so far: the current one's number while inside
  bool inside = false;  // waiting in collective `seq` now
  std::string op;       // "all_reduce", "reduce_scatter", "all_gather_into", "broadcast",
                        // "all_gather", "barrier", "init"
  std::string where;    // the recipe's "file:line" that called it; "" when unknown
  std::string detail;   // what it carries: "float32[64, 16]", "" when nothing

  bool operator==(const CollectiveState& other) const {
    return seq == other.seq && inside == other.inside && op == other.op &&
           where == other.where && detail == other.detail;
  }
  bool operator!=(const CollectiveState& other) const { return !(*this == other); }
};

// The store key of a rank's state.
std::string collective_state_key(int rank);
// The store key a rank sets once its recipe has finished
// (CollectiveMonitor::finish_together) for the `run`-th time: warm workers
// (accel-run --watch) finish once per run on the same store.
std::string finished_key(int rank, int64_t run);

std::string encode_collective_state(const CollectiveState& state);
// Nothing when `text` is not an encoded state.
std::optional<CollectiveState> decode_collective_state(std::string_view text);

// "all_reduce #42 of float32[64] at recipe.lua:30".
std::string describe_collective(const CollectiveState& state);

// Where a rank is, for a report about another rank's collective `waited`:
// "in barrier #42 at x.lua:9 instead", "outside any collective since it
// left broadcast #41 at x.lua:20", "has finished its recipe", or "has
// entered no collective yet".
std::string describe_whereabouts(const std::optional<CollectiveState>& state,
                                 const CollectiveState& waited);

}  // namespace accel
