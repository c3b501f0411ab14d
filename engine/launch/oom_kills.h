// How many processes the kernel's out-of-memory killer has killed in this
// process's memory cgroup (and those below it, where workers live), so the
// launcher can tell an OOM kill from any other SIGKILL. Reads cgroup v2's
// memory.events or v1's memory.oom_control.
#pragma once
#include <optional>
#include <string>

namespace accel {

// The count now, or nothing when this system does not say (no memory
// controller mounted, a kernel without the counter, no permission).
std::optional<long> oom_kill_count();

// The same for an explicit cgroup directory's files, for tests.
std::optional<long> oom_kill_count_in(const std::string& cgroup_dir);

}  // namespace accel
