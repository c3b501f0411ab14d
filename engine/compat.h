// The few places where LibTorch 1.13 and 2.x differ, in one header.
#pragma once
#include <ATen/autocast_mode.h>
#include <ATen/core/grad_mode.h>
#include <torch/version.h>

// ATen/ATen.h brings at::NoGradGuard, at::AutoGradMode and at::GradMode in
// 1.13 but not in 2.x: ATen/core/grad_mode.h (above) declares them in both.

#define ACCEL_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||        \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// c10::Allocator::allocate lost its const, and copy_data became a pure
// virtual, in LibTorch 2.3.
#if ACCEL_TORCH_AT_LEAST(2, 3)
#define ACCEL_ALLOCATE_CONST
#define ACCEL_ALLOCATOR_COPY_DATA                                              \
  void copy_data(void* dest, const void* src, std::size_t count) const override { \
    default_copy_data(dest, src, count);                                        \
  }
#else
#define ACCEL_ALLOCATE_CONST const
#define ACCEL_ALLOCATOR_COPY_DATA
#endif

namespace accel::compat {

// Autocast state per device type: 2.x takes the device type; 1.13 has one
// function per device (cpu, and "gpu" meaning CUDA).
inline bool autocast_enabled(c10::DeviceType device) {
#if ACCEL_TORCH_AT_LEAST(2, 4)
  return at::autocast::is_autocast_enabled(device);
#else
  return device == c10::DeviceType::CUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}

inline void set_autocast_enabled(c10::DeviceType device, bool enabled) {
#if ACCEL_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_enabled(device, enabled);
#else
  if (device == c10::DeviceType::CUDA) {
    at::autocast::set_enabled(enabled);
  } else {
    at::autocast::set_cpu_enabled(enabled);
  }
#endif
}

inline at::ScalarType autocast_dtype(c10::DeviceType device) {
#if ACCEL_TORCH_AT_LEAST(2, 4)
  return at::autocast::get_autocast_dtype(device);
#else
  return device == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                         : at::autocast::get_autocast_cpu_dtype();
#endif
}

inline void set_autocast_dtype(c10::DeviceType device, at::ScalarType dtype) {
#if ACCEL_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_dtype(device, dtype);
#else
  if (device == c10::DeviceType::CUDA) {
    at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_autocast_cpu_dtype(dtype);
  }
#endif
}

}  // namespace accel::compat
