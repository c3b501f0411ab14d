#include "engine/profiler.h"

#include <torch/csrc/autograd/profiler_kineto.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/compat.h"
#include "engine/gpu.h"

namespace accel {
namespace {

namespace profiler = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

// Whether any profiler (this one, or one a test started) records now.
bool someone_records() { return profiler::profilerEnabled(); }

#if !ACCEL_TORCH_AT_LEAST(2, 0)
// LibTorch built without Kineto (Debian's 1.13) records the operators but
// writes no trace; this writes the events it kept in Chrome's trace format,
// as Kineto's writer would for host activity: one complete event ("X") per
// operator, on its thread, with its input shapes when they were recorded.
std::size_t write_events(const profiler::ProfilerResult& result, const std::string& path) {
  nlohmann::json events = nlohmann::json::array();
  const int pid = static_cast<int>(::getpid());
  for (const profiler::KinetoEvent& e : result.events()) {
    nlohmann::json event = {{"ph", "X"},
                            {"cat", e.deviceType() == c10::DeviceType::CPU ? "cpu_op" : "kernel"},
                            {"name", e.name()},
                            {"pid", pid},
                            {"tid", e.startThreadId()},
                            {"ts", e.startUs()},
                            {"dur", e.durationUs()}};
    if (e.hasShapes()) {
      event["args"]["Input Dims"] = std::vector<std::vector<int64_t>>(e.shapes().begin(), e.shapes().end());
    }
    events.push_back(std::move(event));
  }
  std::ofstream out(path);
  out << nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() << '\n';
  TORCH_CHECK(out.good(), "profile: could not write the trace '", path, "'");
  return events.size();
}
#endif

std::set<ActivityType> activities_of(const ProfilerOptions& options) {
  std::set<ActivityType> activities;
  if (options.cpu) activities.insert(ActivityType::CPU);
  if (options.cuda) {
    gpu::require("profile({activities = {\"cuda\"}})");
    activities.insert(ActivityType::CUDA);
  }
  TORCH_CHECK(!activities.empty(), "profile: no activity to record (activities is empty)");
  return activities;
}

ProfilerConfig config_of(const ProfilerOptions& options) {
  return ProfilerConfig(ProfilerState::KINETO, options.record_shapes, options.profile_memory,
                        options.with_stack, options.with_flops);
}

}  // namespace

Profiler::Profiler(ProfilerOptions options) : options_(options) {}

Profiler::~Profiler() {
  if (recording_) discard();
}

void Profiler::discard() {
  if (!recording_) return;
  recording_ = false;
  profiler::disableProfiler();
}

void Profiler::warm_up() {
  TORCH_CHECK(!recording_, "profile: this profiler records already");
  profiler::prepareProfiler(config_of(options_), activities_of(options_));
  warm_ = true;
}

void Profiler::start() {
  TORCH_CHECK(!recording_, "profile: this profiler records already");
  TORCH_CHECK(!someone_records(), "profile: another profiler records in this process; "
                                  "one at a time (LibTorch's profiler is per process)");
  if (!warm_) warm_up();
  profiler::enableProfiler(config_of(options_), activities_of(options_));
  warm_ = false;
  recording_ = true;
}

std::size_t Profiler::stop(const std::string& path) {
  TORCH_CHECK(recording_, "profile: this profiler is not recording");
  recording_ = false;
  std::unique_ptr<profiler::ProfilerResult> result = profiler::disableProfiler();
  TORCH_CHECK(result, "profile: LibTorch's profiler returned no result");
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  if (!folder.empty()) std::filesystem::create_directories(folder);
#if ACCEL_TORCH_AT_LEAST(2, 0)
  std::filesystem::remove(path);
  result->save(path);
  TORCH_CHECK(std::filesystem::exists(path), "profile: this LibTorch (", TORCH_VERSION,
              ") wrote no trace to '", path, "': it was built without Kineto");
  return result->events().size();
#else
  return write_events(*result, path);
#endif
}

}  // namespace accel
