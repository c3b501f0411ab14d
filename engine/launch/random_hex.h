// Random bytes from the kernel (getrandom), as lowercase hex: the store's
// generated token, a live run's id.
#pragma once
#include <cstddef>
#include <string>

namespace accel {

// `bytes` random bytes as 2 * bytes hex digits; throws std::system_error
// naming `what` when the kernel gives none.
std::string random_hex(size_t bytes, const std::string& what);

}  // namespace accel
