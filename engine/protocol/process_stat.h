// A process's /proc/PID/stat line, for the launcher (is a worker stopped?
// when did a process start?) and the warm worker (which processes are in
// its group?). Another process can end at any moment, and reading its file
// then fails (ESRCH): that is an empty answer here, never an exception.
#pragma once
#include <string>

namespace accel {

// The line, or "" when the process is gone or its file cannot be read.
std::string process_stat(long pid);

}  // namespace accel
