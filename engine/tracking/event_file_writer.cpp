#include "engine/tracking/event_file_writer.h"

#include <unistd.h>

#include <atomic>
#include <stdexcept>

#include "engine/tracking/protobuf_wire.h"
#include "engine/tracking/record_framing.h"

namespace accel::tracking {
namespace {

// Field numbers of TensorBoard's messages (tensorboard/compat/proto/
// event.proto, summary.proto; plugins/hparams/plugin_data.proto, api.proto)
// and of google.protobuf.Value (struct.proto), for the fields accel writes.
namespace event {
constexpr int kWallTime = 1, kStep = 2, kFileVersion = 3, kSummary = 5;
}
namespace summary {
constexpr int kValue = 1;
}
namespace summary_value {
constexpr int kTag = 1, kSimpleValue = 2, kMetadata = 9;
}
namespace summary_metadata {
constexpr int kPluginData = 1;
}
namespace plugin_data {
constexpr int kPluginName = 1, kContent = 2;
}
namespace hparams_plugin_data {
constexpr int kVersion = 1, kSessionStartInfo = 3, kSessionEndInfo = 4;
}
namespace session_start_info {
constexpr int kHParams = 1, kStartTimeSecs = 5;
}
namespace session_end_info {
constexpr int kStatus = 1, kEndTimeSecs = 2;
}
namespace map_entry {
constexpr int kKey = 1, kValue = 2;
}
namespace struct_value {
constexpr int kNumberValue = 2, kStringValue = 3, kBoolValue = 4;
}
// tensorboard.hparams.Status
constexpr uint64_t kStatusSuccess = 1, kStatusFailure = 2;

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

// A summary event holding one hparams plugin value, from the plugin's
// HParamsPluginData with `field` (start or end info) set to `info`.
std::string hparams_event(const char* tag, int field, const ProtoWriter& info) {
  ProtoWriter data, plugin, metadata, value, summary, event;
  data.varint(hparams_plugin_data::kVersion, kHParamsDataVersion);
  data.message(field, info);
  plugin.bytes(plugin_data::kPluginName, kHParamsPlugin);
  plugin.bytes(plugin_data::kContent, data.data());
  metadata.message(summary_metadata::kPluginData, plugin);
  value.bytes(summary_value::kTag, tag);
  value.message(summary_value::kMetadata, metadata);
  summary.message(summary::kValue, value);
  event.float64(event::kWallTime, wall_time());
  event.message(event::kSummary, summary);
  return event.data();
}

}  // namespace

EventFileWriter::EventFileWriter(const std::string& run_dir, double flush_seconds)
    : Tracker(event_file_path(run_dir), flush_seconds) {
  ProtoWriter event;
  event.float64(event::kWallTime, wall_time());
  event.bytes(event::kFileVersion, "brain.Event:2");
  write_event(event.data());
  file_.flush();  // TensorBoard finds the run as soon as it exists
}

void EventFileWriter::write_event(const std::string& serialized) {
  record_.clear();
  append_record(record_, serialized);
  file_.append(record_);
}

void EventFileWriter::log(int64_t step, const Scalars& values) {
  // The writers serve every call: clear() keeps their memory, so logging
  // each step allocates nothing once warm.
  static thread_local ProtoWriter event, summary, value;
  summary.clear();
  for (const auto& [name, number] : values) {
    check_name(name, "metric name");
    value.clear();
    value.bytes(summary_value::kTag, name);
    // TensorBoard's scalars are float32, as its own writers store them.
    value.float32(summary_value::kSimpleValue, static_cast<float>(number));
    summary.message(summary::kValue, value);
  }
  event.clear();
  event.float64(event::kWallTime, wall_time());
  event.int64(event::kStep, step);
  event.message(event::kSummary, summary);
  write_event(event.data());
}

void EventFileWriter::log_config(const Config& config) {
  ProtoWriter start, entry, out;
  for (const auto& [key, value] : config) {
    check_name(key, "config key");
    out.clear();
    if (const double* number = std::get_if<double>(&value)) {
      out.float64(struct_value::kNumberValue, *number);
    } else if (const bool* flag = std::get_if<bool>(&value)) {
      out.boolean(struct_value::kBoolValue, *flag);
    } else {
      const std::string& text = std::get<std::string>(value);
      check_utf8(text, "the value of config key '" + key + "'");
      out.bytes(struct_value::kStringValue, text);
    }
    // A map field is a repeated entry message of key and value.
    entry.clear();
    entry.bytes(map_entry::kKey, key);
    entry.message(map_entry::kValue, out);
    start.message(session_start_info::kHParams, entry);
  }
  start.float64(session_start_info::kStartTimeSecs, wall_time());
  write_event(hparams_event(kSessionStartTag, hparams_plugin_data::kSessionStartInfo, start));
  session_started_ = true;
}

void EventFileWriter::close(RunOutcome outcome) {
  if (!file_.is_open()) return;
  if (session_started_) {
    ProtoWriter end;
    end.varint(session_end_info::kStatus, outcome == RunOutcome::success ? kStatusSuccess : kStatusFailure);
    end.float64(session_end_info::kEndTimeSecs, wall_time());
    write_event(hparams_event(kSessionEndTag, hparams_plugin_data::kSessionEndInfo, end));
  }
  file_.close();
}

}  // namespace accel::tracking
