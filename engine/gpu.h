// The GPUs this process can use, through LibTorch. A build on Debian's
// LibTorch has no CUDA: there every query answers "none" and every use
// throws a message saying so, never LibTorch's internal one. The CUDA-only
// parts compile only with ACCEL_WITH_CUDA (a CUDA LibTorch).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace at {
class Tensor;
}

namespace accel::gpu {

// Whether this build has CUDA at all.
bool compiled();
// Visible CUDA devices; 0 in a build without CUDA or on a machine without one.
int count();

// Throws std::runtime_error "`what`: no GPU here (<why>)".
[[noreturn]] void no_gpu(const std::string& what);
// Calls no_gpu(what) when count() is 0.
void require(const std::string& what);

// The device `index`, or the current one when index is -1; checked against count().
int checked_index(int index, const std::string& what);

void set_current(int index);
void synchronize(int index);
// Bytes held by tensors on the device, now and at most since the start (or
// the last reset_peak), from LibTorch's caching allocator.
int64_t memory_allocated(int index);
int64_t max_memory_allocated(int index);
void reset_peak(int index);
// Hands cached, unused blocks back to the driver.
void empty_cache();
// The device's free and total bytes as the driver sees them (cudaMemGetInfo:
// memory LibTorch's allocator caches counts as used), as torch.cuda.mem_get_info.
struct MemoryInfo {
  int64_t free = 0;
  int64_t total = 0;
};
MemoryInfo memory_info(int index);

// The state of device `index`'s default random generator (a byte tensor on
// the CPU), and its restoration, for checkpoints.
at::Tensor rng_state(int index);
void set_rng_state(int index, const at::Tensor& state);

struct DeviceFacts {
  std::string name;
  int64_t total_memory = 0;  // bytes
  int major = 0;             // compute capability
  int minor = 0;
};
std::vector<DeviceFacts> devices();
// "" where there is none.
std::string driver_version();
std::string runtime_version();
std::string nccl_version();

}  // namespace accel::gpu
