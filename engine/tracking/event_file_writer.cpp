#include "engine/tracking/event_file_writer.h"

#include <unistd.h>

#include <atomic>
#include <stdexcept>

#include "engine/tracking/proto/tensorboard_event.pb.h"
#include "engine/tracking/proto/tensorboard_hparams.pb.h"
#include "engine/tracking/record_framing.h"

namespace accel::tracking {
namespace {

// The hparams plugin's names (tensorboard/plugins/hparams/metadata.py).
constexpr const char* kHParamsPlugin = "hparams";
constexpr int kHParamsDataVersion = 0;
constexpr const char* kSessionStartTag = "_hparams_/session_start_info";
constexpr const char* kSessionEndTag = "_hparams_/session_end_info";

std::atomic<int> g_files_opened{0};

std::string event_file_path(const std::string& run_dir) {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return file_in_run_dir(run_dir, "events.out.tfevents." + std::to_string(static_cast<int64_t>(wall_time())) +
                                      "." + host + "." + std::to_string(::getpid()) + "." +
                                      std::to_string(g_files_opened++));
}

// A summary event holding one hparams plugin value.
std::string hparams_event(const char* tag, const tensorboard::HParamsPluginData& data) {
  tensorboard::Event event;
  event.set_wall_time(wall_time());
  tensorboard::Summary::Value* value = event.mutable_summary()->add_value();
  value->set_tag(tag);
  auto* plugin = value->mutable_metadata()->mutable_plugin_data();
  plugin->set_plugin_name(kHParamsPlugin);
  plugin->set_content(data.SerializeAsString());
  return event.SerializeAsString();
}

}  // namespace

EventFileWriter::EventFileWriter(const std::string& run_dir, double flush_seconds)
    : Tracker(event_file_path(run_dir), flush_seconds) {
  tensorboard::Event event;
  event.set_wall_time(wall_time());
  event.set_file_version("brain.Event:2");
  write_event(event.SerializeAsString());
  file_.flush();  // TensorBoard finds the run as soon as it exists
}

void EventFileWriter::write_event(const std::string& serialized) {
  record_.clear();
  append_record(record_, serialized);
  file_.append(record_);
}

void EventFileWriter::log(int64_t step, const Scalars& values) {
  // One event serves every call: Clear() keeps its values' memory, so
  // logging each step allocates nothing once warm.
  static thread_local tensorboard::Event event;
  static thread_local std::string serialized;
  event.Clear();
  event.set_wall_time(wall_time());
  event.set_step(step);
  tensorboard::Summary* summary = event.mutable_summary();
  for (const auto& [name, number] : values) {
    check_name(name, "metric name");
    tensorboard::Summary::Value* value = summary->add_value();
    value->set_tag(name);
    // TensorBoard's scalars are float32, as its own writers store them.
    value->set_simple_value(static_cast<float>(number));
  }
  event.SerializeToString(&serialized);
  write_event(serialized);
}

void EventFileWriter::log_config(const Config& config) {
  tensorboard::HParamsPluginData data;
  data.set_version(kHParamsDataVersion);
  tensorboard::SessionStartInfo* start = data.mutable_session_start_info();
  start->set_start_time_secs(wall_time());
  auto& hparams = *start->mutable_hparams();
  for (const auto& [key, value] : config) {
    check_name(key, "config key");
    google::protobuf::Value& out = hparams[key];
    if (const double* number = std::get_if<double>(&value)) {
      out.set_number_value(*number);
    } else if (const bool* flag = std::get_if<bool>(&value)) {
      out.set_bool_value(*flag);
    } else {
      const std::string& text = std::get<std::string>(value);
      check_utf8(text, "the value of config key '" + key + "'");
      out.set_string_value(text);
    }
  }
  write_event(hparams_event(kSessionStartTag, data));
  session_started_ = true;
}

void EventFileWriter::close(RunOutcome outcome) {
  if (!file_.is_open()) return;
  if (session_started_) {
    tensorboard::HParamsPluginData data;
    data.set_version(kHParamsDataVersion);
    tensorboard::SessionEndInfo* end = data.mutable_session_end_info();
    end->set_status(outcome == RunOutcome::success ? tensorboard::STATUS_SUCCESS
                                                    : tensorboard::STATUS_FAILURE);
    end->set_end_time_secs(wall_time());
    write_event(hparams_event(kSessionEndTag, data));
  }
  file_.close();
}

}  // namespace accel::tracking
