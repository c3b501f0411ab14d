#include "engine/formats/fault_injection.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <string>

#include "engine/protocol/accel_variables.h"

namespace accel::formats {
namespace {

// The occurrence of `point` at which to die, or 0 when the variable names
// it not.
int armed_occurrence(const std::string& spec, const std::string& point) {
  std::stringstream items(spec);
  std::string item;
  while (std::getline(items, item, ',')) {
    std::string name = item.substr(0, item.find('@'));
    if (name != point) continue;
    if (item.find('@') == std::string::npos) return 1;
    int n = std::atoi(item.c_str() + item.find('@') + 1);
    return n > 0 ? n : 1;
  }
  return 0;
}

}  // namespace

void fault_point(const char* point) {
  const char* spec = std::getenv(variables::kFaultInject);
  if (!spec) return;
  int occurrence = armed_occurrence(spec, point);
  if (occurrence == 0) return;
  static std::mutex mutex;
  static std::map<std::string, int> reached;
  std::lock_guard<std::mutex> lock(mutex);
  if (++reached[point] == occurrence) ::kill(::getpid(), SIGKILL);
}

}  // namespace accel::formats
