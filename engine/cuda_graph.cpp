#include "engine/cuda_graph.h"

#include <ATen/autocast_mode.h>

#include <mutex>
#include <optional>

#include "engine/gpu.h"

#ifdef ACCEL_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace accel::gpu {

#ifdef ACCEL_WITH_CUDA

namespace {

// `waiter` runs nothing more until `waited` has run what it holds now.
void wait_for(const c10::cuda::CUDAStream& waiter, const c10::cuda::CUDAStream& waited) {
  at::cuda::CUDAEvent event;
  event.record(waited);
  event.block(waiter);
}

// LibTorch's capture_end reaches the random generator's epilogue only when
// CUDA ends the capture cleanly; after an invalidated one the generator
// still expects a capture, and every later random kernel (dropout) fails
// with "Offset increment outside graph capture". The generator takes a copy
// of its state, the same seed and offset, that no capture holds.
void release_generator_from_capture() {
  at::Generator generator = at::cuda::detail::getDefaultCUDAGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.graphsafe_set_state(generator.clone());
}

}  // namespace

struct StepGraph::Impl {
  at::cuda::CUDAGraph graph;
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
  std::optional<c10::cuda::CUDAStream> previous;  // while on the side stream
  bool cache_was_enabled = true;
  bool capturing = false;
  bool captured = false;

  void end_capture_state() {
    capturing = false;
    at::autocast::set_autocast_cache_enabled(cache_was_enabled);
  }
};

StepGraph::StepGraph() {
  require("cuda_graphs");
  impl_ = std::make_unique<Impl>();
}

StepGraph::~StepGraph() {
  if (impl_ && impl_->capturing) abandon_capture();
  if (impl_ && impl_->previous) leave_side_stream();
}

void StepGraph::enter_side_stream() {
  Impl& s = *impl_;
  TORCH_CHECK(!s.previous, "cuda_graphs: already on the side stream");
  s.previous = c10::cuda::getCurrentCUDAStream();
  wait_for(s.side, *s.previous);
  c10::cuda::setCurrentCUDAStream(s.side);
}

void StepGraph::leave_side_stream() {
  Impl& s = *impl_;
  TORCH_CHECK(s.previous, "cuda_graphs: not on the side stream");
  wait_for(*s.previous, s.side);
  c10::cuda::setCurrentCUDAStream(*s.previous);
  s.previous.reset();
}

void StepGraph::capture_begin() {
  Impl& s = *impl_;
  TORCH_CHECK(s.previous, "cuda_graphs: a capture runs on the side stream (enter_side_stream first)");
  TORCH_CHECK(!s.captured && !s.capturing, "cuda_graphs: this graph holds a capture already");
  s.cache_was_enabled = at::autocast::is_autocast_cache_enabled();
  at::autocast::set_autocast_cache_enabled(false);
  s.capturing = true;
  try {
    s.graph.capture_begin();
  } catch (...) {
    s.end_capture_state();
    throw;
  }
}

void StepGraph::capture_end() {
  Impl& s = *impl_;
  TORCH_CHECK(s.capturing, "cuda_graphs: no capture to end");
  s.end_capture_state();
  s.graph.capture_end();
  s.captured = true;
}

void StepGraph::abandon_capture() {
  Impl& s = *impl_;
  if (!s.capturing) return;
  s.end_capture_state();
  try {
    s.graph.capture_end();  // fails for an invalidated capture; it still ends it
  } catch (const std::exception&) {
    release_generator_from_capture();
  }
  s.graph.reset();
}

bool StepGraph::captured() const { return impl_->captured; }

void StepGraph::replay() {
  TORCH_CHECK(impl_->captured, "cuda_graphs: nothing captured to replay");
  impl_->graph.replay();
}

bool capturing() {
  return count() > 0 && c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None;
}

#else

struct StepGraph::Impl {};

StepGraph::StepGraph() { require("cuda_graphs"); }
StepGraph::~StepGraph() = default;
void StepGraph::enter_side_stream() { no_gpu("cuda_graphs"); }
void StepGraph::leave_side_stream() { no_gpu("cuda_graphs"); }
void StepGraph::capture_begin() { no_gpu("cuda_graphs"); }
void StepGraph::capture_end() { no_gpu("cuda_graphs"); }
void StepGraph::abandon_capture() {}
bool StepGraph::captured() const { return false; }
void StepGraph::replay() { no_gpu("cuda_graphs"); }
bool capturing() { return false; }

#endif

}  // namespace accel::gpu
