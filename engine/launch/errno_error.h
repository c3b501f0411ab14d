// The launcher's system calls fail as std::system_error with errno's reason
// and what was being done ("cannot create a pipe for a worker").
#pragma once
#include <cerrno>
#include <string>
#include <system_error>

namespace accel {

[[noreturn]] inline void throw_errno(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

}  // namespace accel
