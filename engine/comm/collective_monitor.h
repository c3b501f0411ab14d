// A worker's record of the collectives it is in, published to the
// launcher's store (engine/protocol/collective_state.h) so that the launcher
// can report a stall while it lasts, and read back when a collective times
// out so the error can name the ranks that did not arrive and where they are.
//
// enter() and leave() only update memory under a lock; a background thread
// publishes the newest state, at most about ten times a second, so a
// training step pays no network round trip per collective. The same thread
// is a watchdog for backends that cannot time out by themselves (MPI): a
// collective still running kWatchdogGrace after its timeout ends the process
// with the timeout message in its error file.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/protocol/collective_state.h"

namespace accel {

class StoreConnection;
struct StoreAddress;

class CollectiveMonitor {
 public:
  static constexpr std::chrono::seconds kWatchdogGrace{5};

  // Publishes to the store at `store` when its port is set and it can be
  // reached within a second; otherwise it only keeps the record, and timeout
  // messages say the other ranks' whereabouts are unknown. A collective that
  // times out is recorded in `error_file` (the rank's, for the launcher's
  // report), or on stderr without one.
  CollectiveMonitor(int rank, int world_size, const StoreAddress& store,
                    std::chrono::milliseconds timeout, std::string error_file = "");
  ~CollectiveMonitor();
  CollectiveMonitor(const CollectiveMonitor&) = delete;
  CollectiveMonitor& operator=(const CollectiveMonitor&) = delete;

  // Marks the start of a collective; returns its number (1, 2, ...).
  int64_t enter(const std::string& op, const std::string& where, const std::string& detail);
  void leave(int64_t seq);

  // Inside collective "finish" (entered by the caller): says so in the store
  // at once, marks this rank finished and waits until every rank is; the
  // watchdog bounds the wait like any collective's. Over the store, not the
  // backend, so that a rank whose recipe returned early cannot pair its
  // wait with a peer's next collective: the peer waits there, the launcher
  // sees one rank finished while another waits in a collective it never
  // entered (StallInspector::abandoned), and stops the run naming both.
  // False, having done nothing, when there is no store.
  bool finish_together();

  // Publishes this rank's state now rather than at the publisher's next
  // turn: a warm worker (accel-run --watch) that has left "finish" may be
  // told to start its next run at once, and its peers' first collective
  // must not find it still shown in the last run's finish.
  void publish_now() { publish(); }

  // "all_reduce #7 of float32[4] at recipe.lua:9 did not complete within 5 s:
  // rank 1 did not arrive (...)": asks the store where every other rank is.
  std::string timeout_message(int64_t seq);

 private:
  struct InFlight {
    CollectiveState state;
    std::chrono::steady_clock::time_point started;
  };
  CollectiveState current_locked() const;
  // Writes this rank's current state to the store now (taking mutex_, then
  // store_mutex_); false when there is no store, or it has just gone.
  bool publish();
  void run();
  // Every rank's published state; nothing for ranks not heard from.
  std::vector<std::optional<CollectiveState>> read_states();

  const int rank_;
  const int world_size_;
  const std::chrono::milliseconds timeout_;
  const std::string error_file_;
  std::unique_ptr<StoreConnection> store_;  // used under store_mutex_
  // finish_together's wait, on the caller's thread: made with store_ (or
  // neither is).
  std::unique_ptr<StoreConnection> finisher_;
  std::mutex store_mutex_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  int64_t next_seq_ = 1;
  int64_t finishes_ = 0;  // calls of finish_together, one per run of a warm worker
  std::vector<InFlight> in_flight_;  // oldest first
  CollectiveState last_left_;        // seq 0 until one was left
  bool dirty_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace accel
