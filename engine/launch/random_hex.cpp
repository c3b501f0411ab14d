#include "engine/launch/random_hex.h"

#include <sys/random.h>

#include <cerrno>
#include <vector>

#include "engine/launch/errno_error.h"

namespace accel {

std::string random_hex(size_t bytes, const std::string& what) {
  std::vector<unsigned char> bits(bytes);
  for (size_t got = 0; got < bytes;) {
    const ssize_t n = ::getrandom(bits.data() + got, bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno("cannot draw " + what);
    got += static_cast<size_t>(n);
  }
  std::string hex;
  for (unsigned char b : bits) {
    hex += "0123456789abcdef"[b >> 4];
    hex += "0123456789abcdef"[b & 15];
  }
  return hex;
}

}  // namespace accel
