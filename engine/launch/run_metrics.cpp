#include "engine/launch/run_metrics.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace accel::plot {
namespace {

std::string without_trailing_slashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

RunMetrics read_run_metrics(const std::string& run) {
  RunMetrics metrics;
  metrics.name = without_trailing_slashes(run);
  const std::string path = ends_with(metrics.name, ".jsonl") ? metrics.name : metrics.name + "/metrics.jsonl";
  std::ifstream in(path, std::ios::binary);
  if (!in) throw PlotError("cannot read " + path + " (is " + run + " a run folder of a tracker with log_with = \"jsonl\"?)");
  std::stringstream text;
  text << in.rdbuf();
  const std::string content = text.str();
  size_t begin = 0;
  for (int line_number = 1;; ++line_number) {
    const size_t end = content.find('\n', begin);
    if (end == std::string::npos) break;  // no line, or one still being written
    const std::string line = content.substr(begin, end - begin);
    begin = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(line_number);
    nlohmann::json record = nlohmann::json::parse(line, nullptr, false);
    if (record.is_discarded() || !record.is_object()) throw PlotError(where + ": not a JSON object");
    auto step = record.find("step");
    if (step == record.end() || !step->is_number()) throw PlotError(where + ": no numeric \"step\"");
    for (const auto& [name, value] : record.items()) {
      if (name == "step" || name == "time" || !value.is_number()) continue;
      metrics.series[name].emplace_back(step->get<double>(), value.get<double>());
    }
  }
  return metrics;
}

}  // namespace accel::plot
