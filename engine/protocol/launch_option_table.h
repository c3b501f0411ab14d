// The table of accel-run's options (option_table.cpp): one row per option,
// with its config-file key, how its value is read and shown, and how it
// sets LaunchOptions; and the sharding methods a config file picks with
// distributed_type. launch_options.cpp reads command lines and config files
// through these rows; option_values.h converts a value for its row.
#pragma once
#include <string>
#include <vector>

#include "engine/protocol/launch_options.h"

namespace accel::options {

enum class ValueKind {
  none,      // a switch: no value on the command line, true or false in the file
  boolean,   // true or false, on the command line too (--fsdp-offload-params true)
  integer,
  seconds,
  text,      // any text, or one of the row's choices
  numbered,  // one of the choices, or its number from 1 (Accelerate numbers FSDP's strategies)
  names,     // names, comma-separated: "Block,Attention"
};

// An option's value, converted according to its row's kind.
struct Value {
  std::string text;
  long long integer = 0;
  double number = 0;
};

struct OptionRow {
  const char* name;        // "--nproc"
  const char* alias;       // "-h", or nullptr
  ValueKind kind;
  const char* metavar;     // how --help names the value
  double min, max;         // accepted range of integer and seconds values
  const char* choices;     // accepted text values, space-separated; nullptr: any
  const char* config_key;  // its key in the config file; nullptr: command line only
  const char* help;
  void (*apply)(LaunchOptions&, const Value&);
  std::string (*show)(const LaunchOptions&);  // the value in force, as the file would hold it
};

// Accelerate's file picks the sharding with one key, distributed_type, and
// holds its settings in a mapping of their own; the command line says the
// same with a switch and the options of the section's keys.
struct ShardingMethod {
  const char* distributed_type;  // the value of distributed_type that picks it
  const char* option;            // the switch that picks it on the command line
  const char* implied_by;        // an option that picks it too on the command line, or nullptr
  bool LaunchOptions::*used;
  const char* title;             // how messages name it
  const char* section;           // the mapping of its settings in the file
  // Keys Accelerate writes in the section that mean nothing here (launchers,
  // model loading, prefetching), space-separated: accepted and ignored, as
  // the top-level ones of accelerate_only_key.
  const char* accelerate_only;
};

// A mapping of the file whose keys are settings that no distributed_type
// picks: Accelerate's parallelism_config, the mesh's sizes.
struct SettingsSection {
  const char* section;  // its key in the file
  const char* title;    // how messages name it
};

// The rows of a table, for range-for.
template <typename Row>
struct Rows {
  const Row* first;
  const Row* last;
  const Row* begin() const { return first; }
  const Row* end() const { return last; }
};

// Every option accel-run knows, in --help's order.
Rows<OptionRow> option_rows();
// DeepSpeed ZeRO and FSDP.
Rows<ShardingMethod> sharding_methods();
// parallelism_config.
Rows<SettingsSection> settings_sections();

constexpr const char* kDistributedTypeKey = "distributed_type";
// Accelerate's own default when DeepSpeed is picked without a stage.
constexpr int kDefaultZeroStage = 2;

// The row of an option ("--nproc", or an alias), or nullptr.
const OptionRow* find_option(const std::string& name);
// The row of an option the table has.
const OptionRow& row_named(const char* name);
// The row of a config key ("num_processes", "fsdp_config.fsdp_min_num_params"), or nullptr.
const OptionRow* find_config_key(const std::string& key);
std::vector<std::string> option_names();
// Whether `key` is one of Accelerate's top-level keys that mean nothing here.
bool accelerate_only_key(const std::string& key);

// A number as a config file would hold it: "1800", "0.5".
std::string number_text(double value);

}  // namespace accel::options
