#include "engine/protocol/cpu_cores.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <thread>

namespace accel {

int usable_cpu_cores() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
    return std::max(1u, std::thread::hardware_concurrency());
  }
  int cpus = 0;
  bool topology_known = true;
  std::set<std::string> cores;  // one entry per core: the list of its hyper-threads
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    ++cpus;
    std::ifstream siblings("/sys/devices/system/cpu/cpu" + std::to_string(cpu) +
                           "/topology/thread_siblings_list");
    std::string list;
    if (siblings && std::getline(siblings, list)) {
      cores.insert(list);
    } else {
      topology_known = false;
    }
  }
  int count = topology_known ? static_cast<int>(cores.size()) : cpus;
  return count > 0 ? count : 1;
}

}  // namespace accel
