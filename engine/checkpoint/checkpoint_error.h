// The one error type of checkpoint I/O. Its message always names the file
// (and, where it applies, the tensor or key) at fault.
#pragma once
#include <stdexcept>
#include <string>

namespace accel::checkpoint {

struct CheckpointError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace accel::checkpoint
