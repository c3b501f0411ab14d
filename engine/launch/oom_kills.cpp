#include "engine/launch/oom_kills.h"

#include <fstream>
#include <sstream>

namespace accel {
namespace {

// The value of the line "oom_kill N" in a cgroup counter file.
std::optional<long> read_counter(const std::string& path) {
  std::ifstream file(path);
  std::string name;
  long value = 0;
  while (file >> name >> value) {
    if (name == "oom_kill") return value;
  }
  return std::nullopt;
}

struct Mount {
  std::string root;   // the cgroup path mounted there
  std::string point;  // where it is mounted
};

// The mount of the v1 memory controller, or of the v2 hierarchy.
std::optional<Mount> find_mount(bool v2) {
  std::ifstream mountinfo("/proc/self/mountinfo");
  for (std::string line; std::getline(mountinfo, line);) {
    // id parent major:minor root point options [optional...] - type source super_options
    std::istringstream fields(line);
    std::string id, parent, device, root, point, options, field;
    fields >> id >> parent >> device >> root >> point >> options;
    while (fields >> field && field != "-") {
    }
    std::string type, source, super_options;
    fields >> type >> source >> super_options;
    bool memory = ("," + super_options + ",").find(",memory,") != std::string::npos;
    if ((v2 && type == "cgroup2") || (!v2 && type == "cgroup" && memory)) return Mount{root, point};
  }
  return std::nullopt;
}

// This process's cgroup under the mount: its path made relative to the mount's root.
std::string under(const Mount& mount, const std::string& cgroup) {
  std::string relative = cgroup;
  if (mount.root != "/" && relative.rfind(mount.root, 0) == 0) relative.erase(0, mount.root.size());
  return mount.point + relative;
}

}  // namespace

std::optional<long> oom_kill_count_in(const std::string& cgroup_dir) {
  if (auto count = read_counter(cgroup_dir + "/memory.events")) return count;
  return read_counter(cgroup_dir + "/memory.oom_control");
}

std::optional<long> oom_kill_count() {
  std::ifstream cgroups("/proc/self/cgroup");
  std::optional<std::string> v1_path, v2_path;
  for (std::string line; std::getline(cgroups, line);) {
    // hierarchy-id:controllers:path
    size_t first = line.find(':');
    size_t second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    std::string controllers = line.substr(first + 1, second - first - 1);
    std::string path = line.substr(second + 1);
    if (controllers.empty() && line.compare(0, first, "0") == 0) v2_path = path;
    if (("," + controllers + ",").find(",memory,") != std::string::npos) v1_path = path;
  }
  if (v1_path) {
    if (auto mount = find_mount(false)) {
      if (auto count = oom_kill_count_in(under(*mount, *v1_path))) return count;
    }
  }
  if (v2_path) {
    if (auto mount = find_mount(true)) return oom_kill_count_in(under(*mount, *v2_path));
  }
  return std::nullopt;
}

}  // namespace accel
