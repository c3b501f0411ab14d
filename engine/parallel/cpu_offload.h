// Where a sharded model keeps the state the optimizer steps, as FSDP2's
// CPUOffloadPolicy and DeepSpeed's ZeRO-Offload (offload_optimizer_device /
// offload_param_device = "cpu") do: with offload, each flat parameter's
// shard, its gradient slice and (the optimizer making its state like the
// shard) the optimizer state live in host memory, and the optimizer steps
// there, on the CPU. Only the compute device's copies move: a shard is
// copied to the compute device for its all-gather (stage 3) or after the
// step (stages 1 and 2, which keep the full parameters there), and each
// reduce-scattered gradient slice is copied to the host (Note [offload] in
// flat_parameter.h).
//
// On a GPU the host tensors are pinned (pin_memory), so that the copies to
// the GPU are asynchronous DMA; they run on the current stream. On a rank
// computing on the CPU the host is the compute device: the same copies are
// made (the code path is the GPU's), they move nothing between memories.
#pragma once
#include <ATen/core/Tensor.h>

namespace accel {

struct CpuOffload {
  bool pin_memory = true;

  // A host copy of `t` in storage of its own, pinned when `t` is on a GPU
  // and pin_memory is set.
  at::Tensor to_host(const at::Tensor& t) const;
  // `host` on `device` for compute or communication: `host` itself when it
  // is there already, else a copy, asynchronous from pinned memory.
  static at::Tensor to_device(const at::Tensor& host, at::Device device);
};

}  // namespace accel
