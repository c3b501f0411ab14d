// How fast a background writer may go. An asynchronous checkpoint is
// written while training runs; where training's intra-op threads fill every
// core, a writer at full speed takes a core from one of them, and since
// every parallel region waits for its slowest thread, each step slows by
// far more than the writer's own time (2x with 2 threads on 2 cores,
// bench/live/RESULTS.md). A pace keeps the writing thread's CPU time, which
// includes what the kernel spends copying its bytes and starting their
// writeback, to at most `share` of the wall time since begin(), by sleeping
// between chunks. docs/live-runs.md says how the share is chosen.
#pragma once
#include <cstdint>

namespace accel::formats {

class WritePace {
 public:
  // share in (0, 1]; 1 never sleeps.
  explicit WritePace(double share = 1.0);

  // Both on the writing thread: begin() before its first chunk,
  // after_chunk() after each.
  void begin();
  void after_chunk();
  bool paced() const { return share_ < 1.0; }

 private:
  double share_;
  int64_t cpu_start_ns_ = 0;
  int64_t wall_start_ns_ = 0;
};

}  // namespace accel::formats
