#include "engine/parallel/cpu_offload.h"

#include <ATen/ATen.h>

#ifdef ACCEL_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace accel {

namespace {

#ifdef ACCEL_WITH_CUDA
// The copy is queued on a side stream, so that it runs while the kernels
// already queued on the current stream do (a gather is started a unit
// early); the current stream waits for it before anything queued after,
// and the allocator is told the copy is used there.
at::Tensor copy_on_side_stream(const at::Tensor& host, at::Device device) {
  c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(device.index());
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index());
  at::Tensor out;
  {
    c10::cuda::CUDAStreamGuard guard(side);
    out = host.to(device, /*non_blocking=*/true);
  }
  at::cuda::CUDAEvent copied;
  copied.record(side);
  copied.block(current);
  c10::cuda::CUDACachingAllocator::recordStream(out.storage().data_ptr(), current);
  return out;
}
#endif

}  // namespace

at::Tensor CpuOffload::to_host(const at::Tensor& t) const {
  const bool pin = pin_memory && t.is_cuda();
  at::Tensor host = at::empty(t.sizes(), t.options().device(at::kCPU).pinned_memory(pin));
  // From a GPU the copy must have landed before the host reads it.
  host.copy_(t, /*non_blocking=*/false);
  return host;
}

at::Tensor CpuOffload::to_device(const at::Tensor& host, at::Device device) {
  if (host.device() == device) return host;
#ifdef ACCEL_WITH_CUDA
  if (device.is_cuda() && host.is_pinned()) return copy_on_side_stream(host, device);
#endif
  return host.to(device, /*non_blocking=*/host.is_pinned());
}

}  // namespace accel
