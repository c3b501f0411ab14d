// A trace of what LibTorch runs (its operators; on a GPU also the kernels
// and copies), from LibTorch's own profiler, written as Chrome trace JSON
// that chrome://tracing, Perfetto and TensorBoard's profile plugin open: the
// file torch.profiler's export_chrome_trace writes, and so Accelerate's
// profile(). One profiler records in a process at a time (LibTorch's is per
// process). The schedule (wait, warm-up, active steps) is the caller's.
#pragma once
#include <cstddef>
#include <string>

namespace accel {

struct ProfilerOptions {
  bool cpu = true;    // host activity: operators and their threads
  bool cuda = false;  // GPU kernels, copies and memsets (builds with CUDA only)
  bool record_shapes = false;
  bool profile_memory = false;
  bool with_stack = false;
  bool with_flops = false;
};

class Profiler {
 public:
  explicit Profiler(ProfilerOptions options);
  ~Profiler();  // stops a recording that is still on, writing nothing
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // Readies LibTorch's profiler without recording (its own start-up, on a
  // GPU the tracing library's, stays out of the trace): a schedule's warm-up.
  void warm_up();
  // Starts recording (warming up first unless warm_up ran). Fails, saying
  // so, when a profiler already records in this process or when `cuda` is
  // asked of a build or process without a GPU.
  void start();
  // Stops recording and writes what was recorded to `path`, making its
  // folder. Returns the number of events recorded.
  std::size_t stop(const std::string& path);
  // Stops recording and keeps nothing (an error cut the profiled code short).
  void discard();
  bool recording() const { return recording_; }

 private:
  ProfilerOptions options_;
  bool warm_ = false;
  bool recording_ = false;
};

}  // namespace accel
