// The few places where LibTorch 1.13 and 2.x differ, in one header.
#pragma once
#include <torch/version.h>

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
