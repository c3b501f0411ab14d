// Where a worker records what it cannot show in a Lua message: C++ backtraces
// of exceptions that reached Lua, and its fatal error for the launcher's
// report. Both go to the rank's error file ($ACCEL_ERROR_FILE); without a
// launcher (under mpirun) the fatal error goes to stderr instead.
#pragma once
#include <string>

namespace accel::lua {

void log_cpp_backtrace(const std::string& text);

// A collective failed because a peer went away. Under a launcher, records
// it as such and waits a few seconds first: the peer is the culprit, and the
// launcher, which has seen it die, will stop this rank as a victim rather
// than take this rank's error for the cause. Returns to raise the error
// when the launcher did not stop us.
void on_collective_failure(const std::string& text);
// Records the error that ends the worker. Returns false when no error file is
// set, so the caller prints it itself.
bool log_fatal_error(const std::string& text);

}  // namespace accel::lua
