// Where a worker records what it cannot show in a Lua message: C++ backtraces
// of exceptions that reached Lua, and its fatal error for the launcher's
// report. Both go to the rank's error file, which the launcher hands the
// worker once (set_error_file); without a launcher (under mpirun) the fatal
// error goes to stderr instead. One file a process: the worker's.
#pragma once
#include <string>

namespace accel::lua {

// The rank's error file ("" for none), set once when the worker starts.
void set_error_file(const std::string& path);

void log_cpp_backtrace(const std::string& text);

// A collective failed because a peer went away. Under a launcher, records
// it as such and waits a few seconds first: the peer is the culprit, and the
// launcher, which has seen it die, will stop this rank as a victim rather
// than take this rank's error for the cause. Returns to raise the error
// when the launcher did not stop us.
void on_collective_failure(const std::string& text);
// Records the error that ends the worker: in the error file under a launcher,
// else (under mpirun) on stderr.
void report_fatal(const std::string& text);
// Reports `text` as the worker's fatal error and ends the process at once,
// without teardown: peers may be blocked on this rank, and its exit is what
// frees them.
[[noreturn]] void exit_with_error(const std::string& text);

}  // namespace accel::lua
