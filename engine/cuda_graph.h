// One training step captured as a CUDA graph and replayed: every kernel the
// step launches, recorded once and relaunched by one call, so the host's
// cost per step (dispatching each operator, launching each kernel) is paid
// once. LibTorch's at::cuda::CUDAGraph does the capture; this adds the side
// stream PyTorch's recipe for whole-step capture asks for (capture needs a
// stream other than the default one, and the warm-up steps before it run on
// the same stream, so that the workspaces cuBLAS and cuDNN make per stream
// exist before capture), and autocast's cast cache turned off while
// capturing (a cached cast would be a tensor of the capture, reused by
// eager steps). lua/accel/cuda_graphs.lua decides what to capture and when.
// Builds without CUDA have the class, and every use fails saying why.
#pragma once
#include <memory>

namespace accel::gpu {

class StepGraph {
 public:
  StepGraph();  // fails where this build or process has no GPU
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  // Work after enter_side_stream() runs on this graph's side stream, which
  // first waits for the current stream; leave_side_stream() makes the
  // previous stream wait for it and makes that one current again.
  void enter_side_stream();
  void leave_side_stream();

  // Between them, work is recorded into the graph, not run (on the side
  // stream: call enter_side_stream() first). capture_end fails with CUDA's
  // reason when the capture was invalidated (a host synchronisation, a
  // host-to-device copy from pageable memory...); abandon_capture() ends a
  // capture cut short by an error and leaves the graph empty.
  void capture_begin();
  void capture_end();
  void abandon_capture();
  bool captured() const;

  // Runs the captured work on the current stream: what it read is read
  // again from the same addresses, what it wrote is written there again.
  void replay();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Whether the current stream is being captured: code that fills a device
// tensor from the host for each step (an optimizer's learning rate) must
// not do it inside a capture, where the fill would be replayed with the
// captured value.
bool capturing();

}  // namespace accel::gpu
