#include "engine/tracking/tracker.h"

#include <chrono>
#include <filesystem>
#include <stdexcept>

#include "engine/tracking/open_trackers.h"
#include "engine/protocol/utf8.h"

namespace accel::tracking {

Tracker::Tracker(const std::string& path, double flush_seconds) : file_(path, flush_seconds) {
  register_tracker(this);
}

Tracker::~Tracker() { unregister_tracker(this); }

std::string file_in_run_dir(const std::string& run_dir, const std::string& name) {
  std::error_code error;
  std::filesystem::create_directories(run_dir, error);
  if (error) throw std::runtime_error("cannot create the run folder " + run_dir + ": " + error.message());
  return run_dir + "/" + name;
}

void check_utf8(const std::string& text, const std::string& what) {
  if (!valid_utf8(text)) {
    throw std::invalid_argument(what + " '" + escape_invalid_utf8(text) + "' is not valid UTF-8");
  }
}

void check_name(const std::string& name, const std::string& what) {
  if (name.empty()) throw std::invalid_argument(what + " is empty");
  check_utf8(name, what);
}

double wall_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace accel::tracking
