#include "bindings/error_log.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "engine/protocol/error_file.h"
#include "engine/tracking/open_trackers.h"

namespace accel::lua {
namespace {

std::string& error_file_path() {
  static std::string path;
  return path;
}

const char* error_file() { return error_file_path().empty() ? nullptr : error_file_path().c_str(); }

}  // namespace

void set_error_file(const std::string& path) { error_file_path() = path; }

void log_cpp_backtrace(const std::string& text) {
  if (const char* path = error_file()) append_error_record(path, "c++ backtrace", text);
}

void on_collective_failure(const std::string& text) {
  const char* path = error_file();
  if (!path) return;
  append_error_record(path, kPeerLostRecord, text);
  std::this_thread::sleep_for(std::chrono::seconds(5));
}

void report_fatal(const std::string& text) {
  const char* path = error_file();
  if (!path || !append_error_record(path, kFatalRecord, text)) std::fprintf(stderr, "%s\n", text.c_str());
}

void exit_with_error(const std::string& text) {
  // What the trackers buffered is the run's last data: keep it, marked failed.
  tracking::close_open_trackers(tracking::RunOutcome::failure);
  report_fatal(text);
  std::fflush(nullptr);
  std::_Exit(1);
}

}  // namespace accel::lua
