#include "engine/tracking/tracker.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "engine/tracking/open_trackers.h"
#include "engine/utf8/utf8.h"

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
  if (!utf8::valid(text)) {
    throw std::invalid_argument(what + " '" + utf8::escape_invalid(text) + "' is not valid UTF-8");
  }
}

void check_name(const std::string& name, const std::string& what) {
  if (name.empty()) throw std::invalid_argument(what + " is empty");
  check_utf8(name, what);
}

void check_run_name(const std::string& name) {
  check_name(name, "the run name");
  for (size_t i = 0; i < name.size(); ++i) {
    const auto byte = static_cast<unsigned char>(name[i]);
    if (byte < 0x20 || byte == 0x7f) {
      char code[8];
      std::snprintf(code, sizeof code, "0x%02x", byte);
      throw std::invalid_argument("the run name holds a control character (byte " + std::string(code) + " at " +
                                  std::to_string(i + 1) + "): it names a folder, and must be printable");
    }
  }
  if (name.front() == '/') {
    throw std::invalid_argument("the run name '" + name + "' is an absolute path: runs are folders inside project_dir");
  }
  for (size_t begin = 0; begin <= name.size();) {
    const size_t end = std::min(name.find('/', begin), name.size());
    const std::string part = name.substr(begin, end - begin);
    if (part == "." || part == "..") {
      throw std::invalid_argument("the run name '" + name + "' has a '" + part +
                                  "' part: runs are folders inside project_dir, not beside or above it");
    }
    begin = end + 1;
  }
}

double wall_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace accel::tracking
