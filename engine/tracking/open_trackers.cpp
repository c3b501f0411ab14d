#include "engine/tracking/open_trackers.h"

#include <algorithm>
#include <exception>
#include <mutex>
#include <vector>

namespace accel::tracking {
namespace {

std::mutex g_mutex;
std::vector<Tracker*>& trackers() {
  static std::vector<Tracker*> open;
  return open;
}

}  // namespace

void register_tracker(Tracker* tracker) {
  std::lock_guard<std::mutex> lock(g_mutex);
  trackers().push_back(tracker);
}

void unregister_tracker(Tracker* tracker) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto& open = trackers();
  open.erase(std::remove(open.begin(), open.end(), tracker), open.end());
}

void close_open_trackers(RunOutcome outcome) {
  std::vector<Tracker*> open;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    open = trackers();
  }
  for (Tracker* tracker : open) {
    try {
      tracker->close(outcome);
    } catch (const std::exception&) {
      // The worker is already ending with its own error; a full disk here
      // must not hide it.
    }
  }
}

}  // namespace accel::tracking
