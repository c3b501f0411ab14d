// How many CPU cores this process may use, for the default thread count.
#pragma once

namespace accel {

// Physical cores among the CPUs this process may run on (its affinity mask,
// which taskset and container CPU sets narrow): hyper-threads share a core's
// arithmetic units, so a thread each gains little for tensor math. Falls back
// to the number of allowed CPUs when the topology is not readable. At least 1.
int usable_cpu_cores();

}  // namespace accel
