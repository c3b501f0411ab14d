// The few places where LibTorch 1.13 and 2.x differ, in one header.
#pragma once
#include <torch/version.h>

#define ACCEL_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||        \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))
