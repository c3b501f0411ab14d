#include "engine/tracking/jsonl_tracker.h"

#include <fstream>
#include <stdexcept>

#include "engine/tracking/json_text.h"

namespace accel::tracking {

JsonlTracker::JsonlTracker(const std::string& run_dir, double flush_seconds)
    : Tracker(file_in_run_dir(run_dir, "metrics.jsonl"), flush_seconds), run_dir_(run_dir) {}

void JsonlTracker::log(int64_t step, const Scalars& values) {
  line_.assign("{\"step\": ");
  line_ += std::to_string(step);
  line_ += ", \"time\": ";
  append_json_number(line_, wall_time());
  for (const auto& [name, value] : values) {
    check_name(name, "metric name");
    if (name == "step" || name == "time") {
      throw std::invalid_argument("metric name '" + name + "' is the field metrics.jsonl keeps for the " +
                                  name + " of each line");
    }
    line_ += ", ";
    append_json_string(line_, name);
    line_ += ": ";
    append_json_number(line_, value);
  }
  line_ += "}\n";
  file_.append(line_);
}

void JsonlTracker::log_config(const Config& config) {
  std::string text = "{";
  for (size_t i = 0; i < config.size(); ++i) {
    const auto& [key, value] = config[i];
    check_name(key, "config key");
    text += i ? ",\n  " : "\n  ";
    append_json_string(text, key);
    text += ": ";
    if (const double* number = std::get_if<double>(&value)) {
      append_json_number(text, *number);
    } else if (const bool* flag = std::get_if<bool>(&value)) {
      text += *flag ? "true" : "false";
    } else {
      append_json_string(text, std::get<std::string>(value));
    }
  }
  text += config.empty() ? "}\n" : "\n}\n";
  const std::string path = run_dir_ + "/config.json";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw std::runtime_error("cannot write " + path);
}

void JsonlTracker::close(RunOutcome) { file_.close(); }

}  // namespace accel::tracking
