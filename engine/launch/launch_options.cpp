#include "engine/launch/launch_options.h"

#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>

#include "engine/launch/config_file.h"
#include "engine/launch/near_miss.h"

namespace accel {
namespace {

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

std::string number_text(double value) {
  if (value == static_cast<double>(static_cast<long long>(value))) {
    return std::to_string(static_cast<long long>(value));
  }
  std::ostringstream out;
  out << value;
  return out.str();
}

// nccl only in a build on a CUDA LibTorch (scripts/build-cuda.sh).
#if defined(ACCEL_WITH_MPI) && defined(ACCEL_WITH_CUDA)
constexpr const char* kBackends = "gloo mpi nccl";
#elif defined(ACCEL_WITH_MPI)
constexpr const char* kBackends = "gloo mpi";
#elif defined(ACCEL_WITH_CUDA)
constexpr const char* kBackends = "gloo nccl";
#else
constexpr const char* kBackends = "gloo";
#endif

// The apply and show of a row whose value is one of FSDP's settings, kept as text.
template <std::string FsdpSettings::*setting>
void set_fsdp(LaunchOptions& o, const Value& v) {
  o.fsdp.*setting = v.text;
}
template <std::string FsdpSettings::*setting>
std::string show_fsdp(const LaunchOptions& o) {
  return o.fsdp.*setting;
}

// Every option accel-run knows. A new option is a new row. A config key
// "section.key" is `key` in the file's mapping `section` (kShardingMethods).
const OptionRow kOptions[] = {
    {"--nproc", nullptr, ValueKind::integer, "N", 1, 4096, nullptr, nullptr,
     "worker processes to start on this machine (default 1)",
     [](LaunchOptions& o, const Value& v) { o.nproc = static_cast<int>(v.integer); },
     [](const LaunchOptions& o) { return std::to_string(o.nproc); }},
    {"--num-processes", nullptr, ValueKind::integer, "N", 1, 1 << 20, nullptr, "num_processes",
     "processes on all machines together, as Accelerate counts them; --nproc wins",
     [](LaunchOptions& o, const Value& v) { o.num_processes = static_cast<int>(v.integer); },
     [](const LaunchOptions& o) { return std::to_string(o.nproc * o.nnodes); }},
    {"--threads", nullptr, ValueKind::integer, "N", 1, 4096, nullptr, "num_threads",
     "intra-op threads per rank (default: CPU cores / nproc, at least 1)",
     [](LaunchOptions& o, const Value& v) { o.threads = static_cast<int>(v.integer); },
     [](const LaunchOptions& o) { return std::to_string(o.threads); }},
    {"--nnodes", nullptr, ValueKind::integer, "N", 1, 4096, nullptr, "num_machines",
     "machines in the run, each starting its own accel-run (default 1)",
     [](LaunchOptions& o, const Value& v) { o.nnodes = static_cast<int>(v.integer); },
     [](const LaunchOptions& o) { return std::to_string(o.nnodes); }},
    {"--node-rank", nullptr, ValueKind::integer, "K", 0, 4095, nullptr, "machine_rank",
     "this machine's number, 0 to nnodes-1; node 0 hosts the rendezvous store (default 0)",
     [](LaunchOptions& o, const Value& v) { o.node_rank = static_cast<int>(v.integer); },
     [](const LaunchOptions& o) { return std::to_string(o.node_rank); }},
    {"--master-addr", nullptr, ValueKind::text, "HOST", 0, 0, nullptr, "main_process_ip",
     "address of node 0, where the rendezvous store listens (default 127.0.0.1)",
     [](LaunchOptions& o, const Value& v) { o.master_addr = v.text; },
     [](const LaunchOptions& o) { return o.master_addr; }},
    {"--master-port", nullptr, ValueKind::integer, "PORT", 0, 65535, nullptr, "main_process_port",
     "port of the rendezvous store (default 0: a free port; several nodes need one)",
     [](LaunchOptions& o, const Value& v) { o.master_port = static_cast<int>(v.integer); },
     [](const LaunchOptions& o) { return std::to_string(o.master_port); }},
    {"--backend", nullptr, ValueKind::text, "NAME", 0, 0, kBackends, "backend",
     "collective backend: gloo, mpi through mpirun, or nccl for GPU ranks (default gloo; "
     "nccl when every local rank has a GPU of its own)",
     [](LaunchOptions& o, const Value& v) { o.backend = v.text; },
     [](const LaunchOptions& o) { return o.backend; }},
    {"--mixed-precision", nullptr, ValueKind::text, "MODE", 0, 0, "no bf16 fp16",
     "mixed_precision", "the Accelerator's default mixed precision: no, bf16 or fp16",
     [](LaunchOptions& o, const Value& v) { o.mixed_precision = v.text; },
     [](const LaunchOptions& o) {
       return o.mixed_precision.empty() ? std::string("'no'") : "'" + o.mixed_precision + "'";
     }},
    {"--gradient-accumulation-steps", nullptr, ValueKind::integer, "N", 1, 1e6, nullptr,
     "gradient_accumulation_steps", "the Accelerator's default gradient accumulation steps",
     [](LaunchOptions& o, const Value& v) {
       o.gradient_accumulation_steps = static_cast<int>(v.integer);
     },
     [](const LaunchOptions& o) { return std::to_string(std::max(1, o.gradient_accumulation_steps)); }},
    // The file says --use-deepspeed and --use-fsdp with distributed_type (kShardingMethods).
    {"--use-deepspeed", nullptr, ValueKind::none, nullptr, 0, 0, nullptr, nullptr,
     "the Accelerator's default sharding is DeepSpeed's ZeRO, stage 2 unless --zero-stage says",
     [](LaunchOptions& o, const Value& v) { o.use_deepspeed = v.integer != 0; }, nullptr},
    {"--zero-stage", nullptr, ValueKind::integer, "N", 1, 3, nullptr, "deepspeed_config.zero_stage",
     "DeepSpeed ZeRO stage: 1 shards optimizer state, 2 also gradients, 3 also parameters; "
     "implies --use-deepspeed",
     [](LaunchOptions& o, const Value& v) { o.zero_stage = static_cast<int>(v.integer); },
     [](const LaunchOptions& o) { return std::to_string(o.zero_stage); }},
    {"--zero3-init-flag", nullptr, ValueKind::boolean, "true|false", 0, 0, nullptr, "deepspeed_config.zero3_init_flag",
     "at stage 3, acc:build_model builds the model empty on ranks other than the main process",
     [](LaunchOptions& o, const Value& v) { o.zero3_init_flag = v.text; },
     [](const LaunchOptions& o) { return o.zero3_init_flag; }},
    {"--use-fsdp", nullptr, ValueKind::none, nullptr, 0, 0, nullptr, nullptr,
     "the Accelerator's default sharding is FSDP, with the --fsdp-* settings below",
     [](LaunchOptions& o, const Value& v) { o.use_fsdp = v.integer != 0; }, nullptr},
    {"--fsdp-sharding-strategy", nullptr, ValueKind::numbered, "STRATEGY", 0, 0,
     "FULL_SHARD SHARD_GRAD_OP NO_SHARD", "fsdp_config.fsdp_sharding_strategy",
     "what FSDP shards: FULL_SHARD (1), SHARD_GRAD_OP (2) or NO_SHARD (3)",
     set_fsdp<&FsdpSettings::sharding_strategy>, show_fsdp<&FsdpSettings::sharding_strategy>},
    {"--fsdp-auto-wrap-policy", nullptr, ValueKind::text, "POLICY", 0, 0,
     "TRANSFORMER_BASED_WRAP SIZE_BASED_WRAP NO_WRAP", "fsdp_config.fsdp_auto_wrap_policy",
     "which modules FSDP makes units of their own: TRANSFORMER_BASED_WRAP, SIZE_BASED_WRAP, NO_WRAP",
     set_fsdp<&FsdpSettings::auto_wrap_policy>, show_fsdp<&FsdpSettings::auto_wrap_policy>},
    {"--fsdp-transformer-layer-cls-to-wrap", nullptr, ValueKind::names, "NAMES", 0, 0, nullptr,
     "fsdp_config.fsdp_transformer_layer_cls_to_wrap",
     "the module classes TRANSFORMER_BASED_WRAP wraps, comma-separated (Block,Attention)",
     set_fsdp<&FsdpSettings::transformer_layer_cls>, show_fsdp<&FsdpSettings::transformer_layer_cls>},
    {"--fsdp-min-num-params", nullptr, ValueKind::integer, "N", 0, 1e15, nullptr,
     "fsdp_config.fsdp_min_num_params", "the parameters that make a unit under SIZE_BASED_WRAP",
     set_fsdp<&FsdpSettings::min_num_params>, show_fsdp<&FsdpSettings::min_num_params>},
    {"--fsdp-offload-params", nullptr, ValueKind::boolean, "true|false", 0, 0, nullptr,
     "fsdp_config.fsdp_offload_params", "whether FSDP keeps parameters and gradients in CPU memory",
     set_fsdp<&FsdpSettings::cpu_offload>, show_fsdp<&FsdpSettings::cpu_offload>},
    {"--fsdp-state-dict-type", nullptr, ValueKind::text, "TYPE", 0, 0,
     "FULL_STATE_DICT SHARDED_STATE_DICT", "fsdp_config.fsdp_state_dict_type",
     "how save_state writes an FSDP model: FULL_STATE_DICT or SHARDED_STATE_DICT (a file per rank)",
     set_fsdp<&FsdpSettings::state_dict_type>, show_fsdp<&FsdpSettings::state_dict_type>},
    {"--fsdp-sync-module-states", nullptr, ValueKind::boolean, "true|false", 0, 0, nullptr,
     "fsdp_config.fsdp_sync_module_states",
     "every rank starts from the main process's weights; always so in accel, false is refused",
     set_fsdp<&FsdpSettings::sync_module_states>, show_fsdp<&FsdpSettings::sync_module_states>},
    {"--fsdp-cpu-ram-efficient-loading", nullptr, ValueKind::boolean, "true|false", 0, 0, nullptr,
     "fsdp_config.fsdp_cpu_ram_efficient_loading",
     "acc:build_model builds the model empty on ranks other than the main process",
     set_fsdp<&FsdpSettings::cpu_ram_efficient_loading>, show_fsdp<&FsdpSettings::cpu_ram_efficient_loading>},
    {"--debug", nullptr, ValueKind::none, nullptr, 0, 0, nullptr, "debug",
     "check before every collective that all ranks call the same one with the same shapes",
     [](LaunchOptions& o, const Value& v) { o.debug = v.integer != 0; },
     [](const LaunchOptions& o) { return std::string(o.debug ? "true" : "false"); }},
    // No config key: watching is how one session is run, not a setting of the run.
    {"--watch", nullptr, ValueKind::none, nullptr, 0, 0, nullptr, nullptr,
     "keep the workers warm and rerun the recipe each time a Lua file of its folder is saved",
     [](LaunchOptions& o, const Value& v) { o.watch = v.integer != 0; }, nullptr},
    {"--timeout", nullptr, ValueKind::seconds, "SECONDS", 0.1, 1e8, nullptr, "timeout",
     "fail the run when a collective takes longer, naming it and the missing ranks (default 1800)",
     [](LaunchOptions& o, const Value& v) { o.timeout_s = v.number; },
     [](const LaunchOptions& o) { return number_text(o.timeout_s); }},
    {"--stall-report", nullptr, ValueKind::seconds, "SECONDS", 0, 1e8, nullptr, "stall_report",
     "report ranks waiting this long in a collective, and those missing (default 60; 0: never)",
     [](LaunchOptions& o, const Value& v) { o.stall_report_s = v.number; },
     [](const LaunchOptions& o) { return number_text(o.stall_report_s); }},
    {"--max-restarts", nullptr, ValueKind::integer, "K", 0, 1000, nullptr, "max_restarts",
     "restart all workers up to K times after a failure (default 0)",
     [](LaunchOptions& o, const Value& v) { o.max_restarts = static_cast<int>(v.integer); },
     [](const LaunchOptions& o) { return std::to_string(o.max_restarts); }},
    {"--log-dir", nullptr, ValueKind::text, "DIR", 0, 0, nullptr, "log_dir",
     "also write each rank's output to DIR/rank-N.log",
     [](LaunchOptions& o, const Value& v) { o.log_dir = v.text; },
     [](const LaunchOptions& o) { return o.log_dir.empty() ? std::string("''") : o.log_dir; }},
    {"--rdzv-timeout", nullptr, ValueKind::seconds, "SECONDS", 0.1, 1e8, nullptr, "rdzv_timeout",
     "how long the nodes' launchers wait for each other (default 300)",
     [](LaunchOptions& o, const Value& v) { o.rdzv_timeout_s = v.number; },
     [](const LaunchOptions& o) { return number_text(o.rdzv_timeout_s); }},
    // No config key: a secret belongs in the environment, not in a file.
    {"--rdzv-token", nullptr, ValueKind::text, "SECRET", 0, 0, nullptr, nullptr,
     "secret every connection to the store presents; the same on every node "
     "(default $ACCEL_RDZV_TOKEN; one node: generated)",
     [](LaunchOptions& o, const Value& v) { o.rdzv_token = v.text; }, nullptr},
    {"--grace-period", nullptr, ValueKind::seconds, "SECONDS", 0, 3600, nullptr, "grace_period",
     "time the workers get between SIGTERM and SIGKILL when a run stops (default 5)",
     [](LaunchOptions& o, const Value& v) { o.grace_period_s = v.number; },
     [](const LaunchOptions& o) { return number_text(o.grace_period_s); }},
    {"--config", nullptr, ValueKind::text, "FILE", 0, 0, nullptr, nullptr,
     "read options from this YAML file (default: $ACCEL_CONFIG_FILE, else the file "
     "`accel-run config` writes)",
     [](LaunchOptions& o, const Value& v) { o.config = v.text; }, nullptr},
    {"--help", "-h", ValueKind::none, nullptr, 0, 0, nullptr, nullptr, "show this help and exit",
     [](LaunchOptions& o, const Value&) { o.help = true; }, nullptr},
};

// Keys of Accelerate's default_config.yaml that mean nothing here (GPUs,
// TPUs, the Python entry point): accepted, so such a file loads, and ignored.
const char* const kAccelerateOnlyKeys[] = {
    "compute_environment", "downcast_bf16", "dynamo_config",
    "enable_cpu_affinity", "gpu_ids", "main_training_function", "rdzv_backend",
    "same_network", "tpu_env", "tpu_use_cluster", "tpu_use_sudo", "use_cpu",
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
  // kAccelerateOnlyKeys.
  const char* accelerate_only;
};

const ShardingMethod kShardingMethods[] = {
    {"DEEPSPEED", "--use-deepspeed", "--zero-stage", &LaunchOptions::use_deepspeed,
     "DeepSpeed ZeRO", "deepspeed_config",
     "deepspeed_exclusion_filter deepspeed_hostfile deepspeed_inclusion_filter "
     "deepspeed_moe_layer_cls_names deepspeed_multinode_launcher gradient_accumulation_steps "
     "gradient_clipping offload_optimizer_device offload_optimizer_nvme_path offload_param_device "
     "offload_param_nvme_path zero3_save_16bit_model"},
    {"FSDP", "--use-fsdp", nullptr, &LaunchOptions::use_fsdp, "FSDP", "fsdp_config",
     "fsdp_activation_checkpointing fsdp_backward_prefetch fsdp_backward_prefetch_policy "
     "fsdp_forward_prefetch fsdp_ignored_modules fsdp_use_orig_params fsdp_version"},
};

constexpr const char* kDistributedTypeKey = "distributed_type";
// Accelerate's own default when DeepSpeed is picked without a stage.
constexpr int kDefaultZeroStage = 2;

constexpr const char* kUsage = "accel-run RECIPE.lua [options] [-- recipe args]";
constexpr const char* kCommandLine = "command line";

const OptionRow* find_option(const std::string& name) {
  for (const OptionRow& row : kOptions) {
    if (name == row.name || (row.alias && name == row.alias)) return &row;
  }
  return nullptr;
}

const OptionRow& row_named(const char* name) { return *find_option(name); }

const OptionRow* find_config_key(const std::string& key) {
  for (const OptionRow& row : kOptions) {
    if (row.config_key && key == row.config_key) return &row;
  }
  return nullptr;
}

std::vector<std::string> option_names() {
  std::vector<std::string> names;
  for (const OptionRow& row : kOptions) names.emplace_back(row.name);
  return names;
}

// The words of a space-separated list (a row's choices).
std::vector<std::string> words_of(const char* list) {
  std::istringstream words(list);
  std::vector<std::string> out;
  for (std::string word; words >> word;) out.push_back(word);
  return out;
}

bool contains_word(const char* list, const std::string& word) {
  std::vector<std::string> words = words_of(list);
  return std::find(words.begin(), words.end(), word) != words.end();
}

// The row's choices as messages list them: "no, bf16, fp16", or with their
// numbers, "FULL_SHARD (1), SHARD_GRAD_OP (2), NO_SHARD (3)".
std::string choices_list(const OptionRow& row) {
  std::vector<std::string> words = words_of(row.choices);
  std::string list;
  for (size_t i = 0; i < words.size(); ++i) {
    list += (i ? ", " : "") + words[i];
    if (row.kind == ValueKind::numbered) list += " (" + std::to_string(i + 1) + ")";
  }
  return list;
}

// What a row accepts, as messages say it: "an integer from 1 to 4096".
std::string expectation(const OptionRow& row) {
  switch (row.kind) {
    case ValueKind::none:
    case ValueKind::boolean: return "true or false";
    case ValueKind::integer:
      return "an integer from " + number_text(row.min) + " to " + number_text(row.max);
    case ValueKind::seconds:
      return "a number of seconds from " + number_text(row.min) + " to " + number_text(row.max);
    case ValueKind::text:
    case ValueKind::numbered: return row.choices ? "one of " + choices_list(row) : "a text";
    case ValueKind::names: return "names separated by commas (Block,Attention)";
  }
  return "a value";
}

// Whether a quoted YAML string can be the row's value: a quoted number or
// switch is a string in YAML, whatever it looks like.
bool takes_text(ValueKind kind) {
  return kind == ValueKind::text || kind == ValueKind::numbered || kind == ValueKind::names;
}

// YAML 1.1's words for true and false, as yaml-cpp reads them.
std::optional<bool> yaml_bool(const std::string& text) {
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* word : {"true", "yes", "on", "y"}) {
    if (lower == word) return true;
  }
  for (const char* word : {"false", "no", "off", "n"}) {
    if (lower == word) return false;
  }
  return std::nullopt;
}

// "Block, Attention" as "Block,Attention"; nothing when a name is empty.
std::optional<std::string> name_list(const std::string& text) {
  std::istringstream parts(text + ",");  // getline drops a last empty part
  std::string list;
  for (std::string name; std::getline(parts, name, ',');) {
    size_t first = name.find_first_not_of(" \t");
    if (first == std::string::npos) return std::nullopt;
    name = name.substr(first, name.find_last_not_of(" \t") - first + 1);
    list += (list.empty() ? "" : ",") + name;
  }
  return list;
}

// Converts `text` for `row`, or returns nothing when it is not acceptable.
// The value's text is the normal spelling: "true", "2", the choice's name.
std::optional<Value> convert(const OptionRow& row, const std::string& text) {
  Value value;
  value.text = text;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  auto whole_integer = [&] {
    auto [stop, error] = std::from_chars(begin, end, value.integer);
    return !text.empty() && error == std::errc() && stop == end;
  };
  switch (row.kind) {
    case ValueKind::none:
    case ValueKind::boolean: {
      auto flag = yaml_bool(text);
      if (!flag) return std::nullopt;
      value.integer = *flag ? 1 : 0;
      value.text = *flag ? "true" : "false";
      break;
    }
    case ValueKind::integer:
      if (!whole_integer() || value.integer < row.min || value.integer > row.max) return std::nullopt;
      value.text = std::to_string(value.integer);
      break;
    case ValueKind::seconds: {
      auto [stop, error] = std::from_chars(begin, end, value.number);
      // The negated test also rejects NaN.
      if (text.empty() || error != std::errc() || stop != end ||
          !(value.number >= row.min && value.number <= row.max)) {
        return std::nullopt;
      }
      break;
    }
    case ValueKind::numbered: {
      auto words = words_of(row.choices);
      if (whole_integer() && value.integer >= 1 && value.integer <= static_cast<long long>(words.size())) {
        value.text = words[static_cast<size_t>(value.integer - 1)];
      } else if (!contains_word(row.choices, text)) {
        return std::nullopt;
      }
      break;
    }
    case ValueKind::text:
      if (row.choices ? !contains_word(row.choices, text) : text.empty()) return std::nullopt;
      break;
    case ValueKind::names: {
      auto list = name_list(text);
      if (!list) return std::nullopt;
      value.text = *list;
      break;
    }
  }
  return value;
}

Value convert_argument(const OptionRow& row, const std::string& text) {
  if (auto value = convert(row, text)) return *value;
  if (row.choices) {
    throw LaunchOptionsError("unsupported " + std::string(row.name) + " '" + text +
                             "' (supported: " + choices_list(row) + ")" +
                             did_you_mean(text, words_of(row.choices)));
  }
  throw LaunchOptionsError(std::string(row.name) + " expects " + expectation(row) + ", got '" +
                           text + "'");
}

Value convert_entry(const OptionRow& row, const ConfigEntry& entry, const std::string& path) {
  std::string where = path + ":" + std::to_string(entry.line) + ": key '" + entry.key + "' ";
  auto refuse = [&](const std::string& got) {
    std::string hint = row.choices ? did_you_mean(entry.text, words_of(row.choices)) : "";
    return ConfigError(where + "expects " + expectation(row) + ", got " + got + hint);
  };
  switch (entry.shape) {
    case ConfigEntry::Shape::empty: throw ConfigError(where + "has no value; it expects " + expectation(row));
    case ConfigEntry::Shape::compound:
    case ConfigEntry::Shape::mapping: throw refuse(entry.text);
    case ConfigEntry::Shape::quoted:
      if (!takes_text(row.kind)) {
        throw refuse("the string '" + entry.text + "' (write it without quotes)");
      }
      break;
    case ConfigEntry::Shape::plain: break;
  }
  if (auto value = convert(row, entry.text)) return *value;
  throw refuse("'" + entry.text + "'");
}

// The value of a switch given: on the command line, or picked by the file's distributed_type.
Value switched_on() {
  Value value;
  value.text = "true";
  value.integer = 1;
  return value;
}

bool looks_like_option(const std::string& arg) { return arg.size() > 1 && arg[0] == '-'; }

// Whether `arg` is "--" or one of the options, so it cannot be the value of
// the option before it; anything else can (`--nproc -1` is a bad value, not a
// missing one).
bool is_known_option(const std::string& arg) {
  return arg == "--" || find_option(arg.substr(0, arg.find('='))) != nullptr;
}

struct Setting {
  const OptionRow* row;
  Value value;
};

struct CommandLine {
  std::string recipe;
  std::vector<std::string> recipe_args;
  std::vector<Setting> settings;  // in the order given; a later one wins
};

CommandLine read_command_line(const std::vector<std::string>& args) {
  CommandLine line;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      line.recipe_args.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (!looks_like_option(arg)) {
      if (!line.recipe.empty()) {
        throw LaunchOptionsError("unexpected argument '" + arg + "' after the recipe '" +
                                 line.recipe + "'; recipe arguments go after '--', as in: " +
                                 "accel-run " + line.recipe + " -- " + arg);
      }
      line.recipe = arg;
      continue;
    }
    size_t equals = arg.rfind("--", 0) == 0 ? arg.find('=') : std::string::npos;
    std::string name = arg.substr(0, equals);
    const OptionRow* row = find_option(name);
    if (!row) {
      throw LaunchOptionsError("unknown option '" + name + "'" + did_you_mean(name, option_names()));
    }
    Value value;
    if (row->kind == ValueKind::none) {
      if (equals != std::string::npos) throw LaunchOptionsError(name + " takes no value");
      value = switched_on();
    } else if (equals != std::string::npos) {
      value = convert_argument(*row, arg.substr(equals + 1));
    } else if (i + 1 < args.size() && !is_known_option(args[i + 1])) {
      value = convert_argument(*row, args[++i]);
    } else {
      throw LaunchOptionsError(name + " needs a value (" + row->metavar + ")");
    }
    line.settings.push_back({row, value});
  }
  return line;
}

bool file_exists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0;
}

// Which file the options are read over, or "" for none.
std::string config_to_read(const CommandLine& line, const ConfigLookup& lookup) {
  for (auto it = line.settings.rbegin(); it != line.settings.rend(); ++it) {
    if (it->row == &row_named("--config")) return it->value.text;
  }
  if (!lookup.from_variable.empty()) return lookup.from_variable;
  if (!lookup.default_path.empty() && file_exists(lookup.default_path)) return lookup.default_path;
  return "";
}

void set(LaunchOptions& options, const OptionRow& row, const Value& value, const std::string& origin) {
  row.apply(options, value);
  options.origins[row.name] = origin;
}

std::string file_line(const std::string& path, int line) { return path + ":" + std::to_string(line); }

// What a file holds where a value was wanted, as messages quote it.
std::string held(const ConfigEntry& entry) {
  switch (entry.shape) {
    case ConfigEntry::Shape::plain:
    case ConfigEntry::Shape::quoted: return "'" + entry.text + "'";
    case ConfigEntry::Shape::empty: return "no value";
    case ConfigEntry::Shape::compound:
    case ConfigEntry::Shape::mapping: return entry.text;
  }
  return entry.text;
}

const ShardingMethod* method_with_section(const std::string& key) {
  for (const ShardingMethod& method : kShardingMethods) {
    if (key == method.section) return &method;
  }
  return nullptr;
}

// Whether `row` is a setting in the method's section of the file.
bool in_section(const OptionRow& row, const ShardingMethod& method) {
  std::string prefix = std::string(method.section) + ".";
  return row.config_key && std::string(row.config_key).rfind(prefix, 0) == 0;
}

// The row's key within its section: "zero_stage" for "deepspeed_config.zero_stage".
std::string key_in_section(const OptionRow& row) {
  std::string key = row.config_key;
  return key.substr(key.find('.') + 1);
}

// The method the file's distributed_type picks, or nullptr for Accelerate's
// other types (NO, MULTI_CPU, MULTI_GPU...), which shard nothing. A near miss
// of DEEPSPEED or FSDP is refused rather than read as no sharding.
const ShardingMethod* method_named(const ConfigEntry& entry, const std::string& path) {
  std::vector<std::string> names;
  for (const ShardingMethod& method : kShardingMethods) {
    if (entry.text == method.distributed_type) return &method;
    names.emplace_back(method.distributed_type);
  }
  bool scalar = entry.shape == ConfigEntry::Shape::plain || entry.shape == ConfigEntry::Shape::quoted;
  std::string hint = scalar ? did_you_mean(entry.text, names) : "";
  if (scalar && hint.empty()) return nullptr;
  throw ConfigError(file_line(path, entry.line) + ": key '" + entry.key +
                    "' expects DEEPSPEED or FSDP to shard, or another of Accelerate's types to "
                    "shard nothing, got " + held(entry) + hint);
}

// Checks the settings of the method's section and applies them when
// `applies` (not when the command line picks another method).
void apply_section(LaunchOptions& options, const ShardingMethod& method, const ConfigEntry& section,
                   const std::string& path, bool applies) {
  if (section.shape == ConfigEntry::Shape::empty) return;
  if (section.shape != ConfigEntry::Shape::mapping) {
    throw ConfigError(file_line(path, section.line) + ": key '" + section.key + "' expects " +
                      method.title + "'s settings, indented below it as key: value lines, got " +
                      held(section));
  }
  std::vector<std::string> known;
  for (const OptionRow& row : kOptions) {
    if (in_section(row, method)) known.push_back(key_in_section(row));
  }
  for (ConfigEntry setting : section.entries) {
    std::string key = std::string(method.section) + "." + setting.key;
    const OptionRow* row = find_config_key(key);
    if (!row) {
      if (contains_word(method.accelerate_only, setting.key)) continue;
      auto near = nearest_name(setting.key, known);
      throw ConfigError(file_line(path, setting.line) + ": unknown key '" + key + "'" +
                        (near ? " (did you mean '" + std::string(method.section) + "." + *near + "'?)" : ""));
    }
    setting.key = key;
    Value value = convert_entry(*row, setting, path);
    if (applies) set(options, *row, value, file_line(path, setting.line));
  }
}

// Applies the file at `path`. `picked` is the sharding method the command
// line picks, or nullptr: it wins, so the file's pick of another method and
// that method's settings are checked but not applied.
void apply_config(LaunchOptions& options, const std::string& path, const ShardingMethod* picked) {
  ConfigFile file = read_config_file(path);
  for (const ConfigEntry& entry : file.entries) {
    if (entry.key == kDistributedTypeKey) {
      const ShardingMethod* method = method_named(entry, path);
      if (method && (!picked || picked == method)) {
        set(options, row_named(method->option), switched_on(), file_line(path, entry.line));
      }
      continue;
    }
    if (const ShardingMethod* method = method_with_section(entry.key)) {
      apply_section(options, *method, entry, path, !picked || picked == method);
      continue;
    }
    // A key of a section's row stands only in its section.
    const OptionRow* row = entry.key.find('.') == std::string::npos ? find_config_key(entry.key) : nullptr;
    if (!row) {
      bool accelerate_only = std::any_of(std::begin(kAccelerateOnlyKeys), std::end(kAccelerateOnlyKeys),
                                         [&](const char* key) { return entry.key == key; });
      if (accelerate_only) continue;
      throw ConfigError(file_line(path, entry.line) + ": unknown key '" + entry.key + "'" +
                        did_you_mean(entry.key, config_keys()));
    }
    set(options, *row, convert_entry(*row, entry, path), file_line(path, entry.line));
  }
  options.config_in_force = path;
}

// How messages name a setting: the option, or the key and where the file set it.
std::string named(const LaunchOptions& options, const char* option) {
  const OptionRow& row = row_named(option);
  auto origin = options.origins.find(option);
  if (origin == options.origins.end() || origin->second == kCommandLine || !row.config_key) {
    return row.name;
  }
  return "key '" + std::string(row.config_key) + "' (" + origin->second + ")";
}

bool from_command_line(const LaunchOptions& options, const char* option) {
  auto origin = options.origins.find(option);
  return origin != options.origins.end() && origin->second == kCommandLine;
}

// The sharding method `options` use, or nullptr for none (never two: the
// command line cannot pick two, and the file's pick yields to it).
const ShardingMethod* method_in_use(const LaunchOptions& options) {
  for (const ShardingMethod& method : kShardingMethods) {
    if (options.*method.used) return &method;
  }
  return nullptr;
}

// What the sharding settings mean together: a method's settings need the
// method, DeepSpeed without a stage gets Accelerate's, and
// TRANSFORMER_BASED_WRAP needs the classes it wraps.
void settle_sharding(LaunchOptions& options) {
  const ShardingMethod* used = method_in_use(options);
  for (const ShardingMethod& method : kShardingMethods) {
    if (&method == used) continue;
    for (const OptionRow& row : kOptions) {
      if (!in_section(row, method) || !options.origins.count(row.name)) continue;
      std::string setting = named(options, row.name) + " is a setting of " + method.title;
      if (!used) {
        throw LaunchOptionsError(setting + ", which this launch does not use: give " +
                                 method.option + " (distributed_type: " +
                                 method.distributed_type + " in the config file)");
      }
      const std::string& origin = options.origins.at(used->option);
      throw LaunchOptionsError(setting + ", but this launch shards with " + used->title +
                               ", as " +
                               (origin == kCommandLine ? "the command line"
                                                       : "key 'distributed_type' (" + origin + ")") +
                               " says");
    }
  }
  if (options.use_deepspeed && options.zero_stage == 0) options.zero_stage = kDefaultZeroStage;
  if (options.use_fsdp && options.fsdp.auto_wrap_policy == "TRANSFORMER_BASED_WRAP" &&
      options.fsdp.transformer_layer_cls.empty()) {
    throw LaunchOptionsError(named(options, "--fsdp-auto-wrap-policy") +
                             " is TRANSFORMER_BASED_WRAP, which needs the classes of the modules "
                             "to wrap: give --fsdp-transformer-layer-cls-to-wrap NAMES "
                             "(fsdp_transformer_layer_cls_to_wrap in fsdp_config), e.g. Block");
  }
}

// What follows from the settings together, and what only together can be wrong.
void settle(LaunchOptions& options, int cpu_cores, RecipeRule rule) {
  if (options.recipe.empty() && !options.help && rule == RecipeRule::required) {
    throw LaunchOptionsError(std::string("no recipe given; usage: ") + kUsage);
  }
  if (options.node_rank >= options.nnodes) {
    throw LaunchOptionsError(named(options, "--node-rank") + " is " +
                             std::to_string(options.node_rank) + ", but with " +
                             named(options, "--nnodes") + " " + std::to_string(options.nnodes) +
                             " node ranks go from 0 to " + std::to_string(options.nnodes - 1));
  }
  if (options.num_processes > 0 && !from_command_line(options, "--nproc")) {
    if (options.num_processes % options.nnodes != 0) {
      throw LaunchOptionsError(named(options, "--num-processes") + " is " +
                               std::to_string(options.num_processes) +
                               ", which does not split evenly over " +
                               std::to_string(options.nnodes) + " machines");
    }
    options.nproc = options.num_processes / options.nnodes;
  }
  if (options.nnodes > 1 && options.master_port == 0) {
    throw LaunchOptionsError("with " + named(options, "--nnodes") + " " +
                             std::to_string(options.nnodes) +
                             ", every node's launcher must know the store's port: give "
                             "--master-port (main_process_port in the config file)");
  }
  if (options.nnodes > 1 && options.backend == "mpi") {
    throw LaunchOptionsError(named(options, "--backend") +
                             " mpi runs on one machine from accel-run; for several, start "
                             "accel-run with mpirun and a host file");
  }
  if (!options.log_dir.empty() && options.backend == "mpi") {
    throw LaunchOptionsError(named(options, "--log-dir") +
                             " does not apply to --backend mpi, whose ranks' output is mpirun's: "
                             "use mpirun's --output-filename");
  }
  if (options.watch && options.nnodes > 1) {
    throw LaunchOptionsError("--watch runs on one machine; it cannot be combined with " +
                             named(options, "--nnodes") + " " + std::to_string(options.nnodes));
  }
  if (options.watch && options.backend == "mpi") {
    throw LaunchOptionsError("--watch keeps its workers' process group between runs, which " +
                             named(options, "--backend") + " mpi (mpirun's ranks) cannot do; "
                             "use gloo");
  }
  if (options.watch && options.max_restarts > 0) {
    throw LaunchOptionsError("--watch replaces failed workers by itself; drop " +
                             named(options, "--max-restarts"));
  }
  if (options.threads == 0) options.threads = std::max(1, cpu_cores / options.nproc);
  settle_sharding(options);
}

// The sharding method the command line picks, or nullptr; picking two is refused.
const ShardingMethod* picked_by(const CommandLine& line) {
  const ShardingMethod* picked = nullptr;
  const OptionRow* picking = nullptr;
  for (const Setting& setting : line.settings) {
    for (const ShardingMethod& method : kShardingMethods) {
      const OptionRow* row = setting.row;
      bool picks = row == &row_named(method.option) ||
                   (method.implied_by && row == &row_named(method.implied_by));
      if (!picks || picked == &method) continue;
      if (picked) {
        throw LaunchOptionsError(std::string(picking->name) + " (" + picked->title + ") and " +
                                 row->name + " (" + method.title +
                                 ") both choose how the model is sharded; give one of them");
      }
      picked = &method;
      picking = row;
    }
  }
  return picked;
}

LaunchOptions options_from(const CommandLine& line, const std::string& config_path) {
  LaunchOptions options;
  options.threads = 0;  // not given yet
  const ShardingMethod* picked = picked_by(line);
  if (!config_path.empty()) apply_config(options, config_path, picked);
  options.recipe = line.recipe;
  options.recipe_args = line.recipe_args;
  for (const Setting& setting : line.settings) set(options, *setting.row, setting.value, kCommandLine);
  if (picked) set(options, row_named(picked->option), switched_on(), kCommandLine);  // --zero-stage too
  return options;
}

}  // namespace

ConfigLookup ConfigLookup::from_environment() {
  const char* variable = std::getenv(kConfigFileVariable);
  return ConfigLookup{variable ? variable : "", default_config_path()};
}

LaunchOptions parse_launch_options(const std::vector<std::string>& args, int cpu_cores,
                                   RecipeRule rule) {
  LaunchOptions options = options_from(read_command_line(args), "");
  settle(options, cpu_cores, rule);
  return options;
}

LaunchOptions resolve_launch_options(const std::vector<std::string>& args,
                                     const ConfigLookup& lookup, int cpu_cores, RecipeRule rule) {
  CommandLine line = read_command_line(args);
  LaunchOptions options = options_from(line, config_to_read(line, lookup));
  settle(options, cpu_cores, rule);
  return options;
}

std::string describe_settings(const LaunchOptions& options) {
  auto origin_of = [&](const char* option) {
    auto origin = options.origins.find(option);
    return origin == options.origins.end() ? std::string("default") : origin->second;
  };
  std::ostringstream out;
  for (const OptionRow& row : kOptions) {
    if (!row.config_key || std::strchr(row.config_key, '.')) continue;
    std::string from = origin_of(row.name);
    if (std::string(row.name) == "--num-processes") {
      from = "--nproc x --nnodes";
    } else if (std::string(row.name) == "--threads" && !options.origins.count(row.name)) {
      from = "default: CPU cores / nproc";
    }
    out << row.config_key << ": " << row.show(options) << "  # " << from << '\n';
  }
  const ShardingMethod* used = method_in_use(options);
  if (!used) {
    out << kDistributedTypeKey << ": 'NO'  # default: no sharding\n";
    return out.str();
  }
  // The method's section holds the settings the launch gives, as the file would.
  out << kDistributedTypeKey << ": " << used->distributed_type << "  # " << origin_of(used->option)
      << '\n';
  std::string settings;
  for (const OptionRow& row : kOptions) {
    std::string value = in_section(row, *used) ? row.show(options) : "";
    if (value.empty()) continue;
    settings += "  " + key_in_section(row) + ": " + value + "  # " + origin_of(row.name) + "\n";
  }
  out << used->section << ":" << (settings.empty() ? " {}\n" : "\n" + settings);
  return out.str();
}

std::vector<std::string> config_keys() {
  std::vector<std::string> keys;
  for (const OptionRow& row : kOptions) {
    if (row.config_key && !std::strchr(row.config_key, '.')) keys.emplace_back(row.config_key);
  }
  keys.emplace_back(kDistributedTypeKey);
  for (const ShardingMethod& method : kShardingMethods) keys.emplace_back(method.section);
  return keys;
}

std::string config_value_problem(const std::string& key, const std::string& text) {
  const OptionRow* row = find_config_key(key);
  if (!row && key != kDistributedTypeKey) return "is not a config key" + did_you_mean(key, config_keys());
  ConfigEntry entry{key, text, ConfigEntry::Shape::plain, 0, {}};
  try {
    if (row) {
      convert_entry(*row, entry, "");
    } else {
      method_named(entry, "");
    }
  } catch (const ConfigError& error) {
    std::string message = error.what();
    return message.substr(message.find(" expects ") + 1);
  }
  return "";
}

std::string usage_text() {
  std::ostringstream out;
  out << "usage: " << kUsage << "\n"
      << "       accel-run config [--default] [--config FILE]\n"
      << "       accel-run env [options]\n"
      << "       accel-run test [options]\n"
      << "       accel-run repl [options]\n"
      << "       accel-run plot RUN_DIR... [-o FILE.png|FILE.svg] [--metric NAME] [--smooth K]\n\n"
      << "Runs a Lua training recipe on worker processes and supervises them.\n"
      << "`config` writes a config file, `env` describes this installation for a bug\n"
      << "report, `test` checks every collective on the configured ranks.\n\n"
      << "options:\n";
  constexpr size_t kColumn = 34;  // where the help starts; longer names put it on a line of its own
  for (const OptionRow& row : kOptions) {
    std::string names = row.alias ? std::string(row.alias) + ", " + row.name : row.name;
    if (row.metavar) names += std::string(" ") + row.metavar;
    std::string gap = names.size() < kColumn ? std::string(kColumn - names.size(), ' ')
                                             : "\n" + std::string(kColumn + 2, ' ');
    out << "  " << names << gap << row.help << '\n';
  }
  return out.str();
}

}  // namespace accel
