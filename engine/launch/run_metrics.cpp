#include "engine/launch/run_metrics.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "engine/json/json_error.h"
#include "engine/json/json_reader.h"

namespace accel::plot {
namespace {

// The longest record line read: a tracker's are a few hundred bytes.
constexpr size_t kMaxLineBytes = size_t(1) << 20;

std::string without_trailing_slashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// One record line: its numeric values join their series.
void take_line(RunMetrics& metrics, const std::string& line, const std::string& where) {
  if (line.find_first_not_of(" \t\r") == std::string::npos) return;
  nlohmann::json record;
  try {
    record = strict_json::parse_json(line, where, kMaxLineBytes);
  } catch (const strict_json::JsonError& e) {
    // The reason names the cause (a number out of range such as 1e999,
    // ill-formed UTF-8, a syntax error, not an object) and where in the line.
    throw PlotError(where + ": " + e.problem());
  }
  auto step = record.find("step");
  if (step == record.end() || !step->is_number()) throw PlotError(where + ": no numeric \"step\"");
  for (const auto& [name, value] : record.items()) {
    if (name == "step" || name == "time") continue;
    double number = 0;
    if (value.is_number()) {
      number = value.get<double>();
    } else if (value == "NaN" || value == "Infinity" || value == "-Infinity") {
      // How the jsonl tracker writes what JSON has no number for.
      number = std::numeric_limits<double>::quiet_NaN();
      RunMetrics::NonFinite& seen = metrics.non_finite[name];
      if (seen.count++ == 0) seen.first_step = step->get<double>();
    } else {
      continue;
    }
    metrics.series[name].emplace_back(step->get<double>(), number);
  }
}

}  // namespace

RunMetrics read_run_metrics(const std::string& run) {
  RunMetrics metrics;
  metrics.name = without_trailing_slashes(run);
  const std::string path = ends_with(metrics.name, ".jsonl") ? metrics.name : metrics.name + "/metrics.jsonl";
  // O_NONBLOCK: opening a FIFO would wait for a writer, forever.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    throw PlotError("cannot read " + path + " (is " + run + " a run folder of a tracker with log_with = \"jsonl\"?)");
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  // A tracker writes a regular file; a FIFO, a device (/dev/zero reads
  // without end) or a folder is refused before a byte is read.
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    throw PlotError(path + " is not a regular file (a FIFO, device or folder): a jsonl tracker writes a file");
  }
  // Line by line, so that memory follows the points kept, not the file.
  std::string pending;
  char buffer[65536];
  int line_number = 1;
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw PlotError("cannot read " + path + ": " + std::strerror(errno));
    if (n == 0) break;  // what is pending has no newline yet: a line still being written
    size_t begin = 0;
    for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
      if (buffer[i] != '\n') continue;
      pending.append(buffer + begin, i - begin);
      take_line(metrics, pending, path + ":" + std::to_string(line_number++));
      pending.clear();
      begin = i + 1;
    }
    pending.append(buffer + begin, static_cast<size_t>(n) - begin);
    if (pending.size() > kMaxLineBytes) {
      throw PlotError(path + ":" + std::to_string(line_number) + ": a line longer than " +
                      std::to_string(kMaxLineBytes >> 20) + " MiB; a tracker's records are a few hundred bytes");
    }
  }
  return metrics;
}

}  // namespace accel::plot
