// Every tracker alive in this process, so that a worker ending on an error
// (or by os.exit) still writes out what its trackers buffered and marks the
// run failed, although the Lua state that owns them is never closed.
#pragma once
#include "engine/tracking/tracker.h"

namespace accel::tracking {

void register_tracker(Tracker* tracker);
void unregister_tracker(Tracker* tracker);

// Closes every tracker still open with `outcome`; a tracker that fails to
// write is skipped (the process is ending and has its own error to report).
void close_open_trackers(RunOutcome outcome);

}  // namespace accel::tracking
