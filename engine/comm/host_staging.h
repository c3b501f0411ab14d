// Collectives on CUDA tensors through a backend that carries host memory
// only (Gloo, the shared memory segment: ranks sharing one GPU, which NCCL
// refuses): the input is copied to the host, the collective runs there and
// its output is copied back.
#pragma once
#include <ATen/ATen.h>

namespace accel {

// Calls run(host_output, host_input), then copies host_output into `output`.
template <class Run>
void on_host(at::Tensor& output, const at::Tensor& input, Run&& run) {
  at::Tensor host_output = at::empty(output.sizes(), output.options().device(at::kCPU));
  at::Tensor host_input = input.cpu();
  run(host_output, host_input);
  output.copy_(host_output);
}

}  // namespace accel
