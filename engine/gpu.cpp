#include "engine/gpu.h"

#include <ATen/ATen.h>
#include <torch/cuda.h>

#include <stdexcept>

#ifdef ACCEL_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#include <torch/csrc/distributed/c10d/NCCLUtils.hpp>
#endif

namespace accel::gpu {
namespace {

std::string why_none() {
  return compiled() ? "no CUDA device is visible to this process"
                    : "this build of accel has no CUDA: build it with scripts/build-cuda.sh";
}

std::string version_text(int packed) {  // CUDA packs 12.4 as 12040
  return std::to_string(packed / 1000) + "." + std::to_string((packed % 1000) / 10);
}

}  // namespace

bool compiled() {
#ifdef ACCEL_WITH_CUDA
  return true;
#else
  return false;
#endif
}

int count() { return compiled() ? static_cast<int>(torch::cuda::device_count()) : 0; }

[[noreturn]] void no_gpu(const std::string& what) {
  throw std::runtime_error(what + ": no GPU here (" + why_none() + ")");
}

void require(const std::string& what) {
  if (count() == 0) no_gpu(what);
}

#ifdef ACCEL_WITH_CUDA

int checked_index(int index, const std::string& what) {
  require(what);
  if (index == -1) return c10::cuda::current_device();
  if (index < 0 || index >= count()) {
    throw std::runtime_error(what + ": no GPU " + std::to_string(index) + " (this process sees " +
                             std::to_string(count()) + ")");
  }
  return index;
}

void set_current(int index) {
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(checked_index(index, "set_device")));
}

void synchronize(int index) {
  torch::cuda::synchronize(checked_index(index, "accel.cuda.synchronize"));
}

namespace {
c10::CachingAllocator::Stat allocated(int index, const std::string& what) {
  return c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(checked_index(index, what)))
      .allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
}
}  // namespace

int64_t memory_allocated(int index) { return allocated(index, "accel.cuda.memory_allocated").current; }
int64_t max_memory_allocated(int index) { return allocated(index, "accel.cuda.max_memory_allocated").peak; }

void reset_peak(int index) {
  c10::cuda::CUDACachingAllocator::resetPeakStats(
      static_cast<c10::DeviceIndex>(checked_index(index, "accel.cuda.reset_peak_memory_stats")));
}

void empty_cache() {
  require("accel.cuda.empty_cache");
  c10::cuda::CUDACachingAllocator::emptyCache();
}

MemoryInfo memory_info(int index) {
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(checked_index(index, "accel.cuda.mem_get_info")));
  size_t free = 0, total = 0;
  C10_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return {static_cast<int64_t>(free), static_cast<int64_t>(total)};
}

at::Tensor rng_state(int index) {
  // A copy shares the generator (Generator is a reference to it).
  at::Generator generator = at::cuda::detail::getDefaultCUDAGenerator(
      static_cast<c10::DeviceIndex>(checked_index(index, "CUDA generator state")));
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

void set_rng_state(int index, const at::Tensor& state) {
  at::Generator generator = at::cuda::detail::getDefaultCUDAGenerator(
      static_cast<c10::DeviceIndex>(checked_index(index, "CUDA generator state")));
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

std::vector<DeviceFacts> devices() {
  std::vector<DeviceFacts> facts;
  for (int i = 0; i < count(); ++i) {
    const cudaDeviceProp* p = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(i));
    facts.push_back({p->name, static_cast<int64_t>(p->totalGlobalMem), p->major, p->minor});
  }
  return facts;
}

std::string driver_version() {
  int v = 0;
  return cudaDriverGetVersion(&v) == cudaSuccess && v > 0 ? version_text(v) : "";
}

std::string runtime_version() {
  int v = 0;
  return cudaRuntimeGetVersion(&v) == cudaSuccess ? version_text(v) : "";
}

std::string nccl_version() { return c10d::getNcclVersion(); }

#else  // no CUDA in this build: every use says so

int checked_index(int, const std::string& what) { no_gpu(what); }
void set_current(int) { no_gpu("set_device"); }
void synchronize(int) { no_gpu("accel.cuda.synchronize"); }
int64_t memory_allocated(int) { no_gpu("accel.cuda.memory_allocated"); }
int64_t max_memory_allocated(int) { no_gpu("accel.cuda.max_memory_allocated"); }
void reset_peak(int) { no_gpu("accel.cuda.reset_peak_memory_stats"); }
void empty_cache() { no_gpu("accel.cuda.empty_cache"); }
MemoryInfo memory_info(int) { no_gpu("accel.cuda.mem_get_info"); }
at::Tensor rng_state(int) { no_gpu("CUDA generator state"); }
void set_rng_state(int, const at::Tensor&) { no_gpu("CUDA generator state"); }
std::vector<DeviceFacts> devices() { return {}; }
std::string driver_version() { return ""; }
std::string runtime_version() { return ""; }
std::string nccl_version() { return ""; }

#endif

}  // namespace accel::gpu
