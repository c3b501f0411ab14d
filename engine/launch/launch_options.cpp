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

// `none` is a switch: no value on the command line, true or false in the file.
enum class ValueKind { none, integer, seconds, text };

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

// Every option accel-run knows. A new option is a new row.
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
    {"--debug", nullptr, ValueKind::none, nullptr, 0, 0, nullptr, "debug",
     "check before every collective that all ranks call the same one with the same shapes",
     [](LaunchOptions& o, const Value& v) { o.debug = v.integer != 0; },
     [](const LaunchOptions& o) { return std::string(o.debug ? "true" : "false"); }},
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
    "compute_environment", "distributed_type", "downcast_bf16", "dynamo_config",
    "enable_cpu_affinity", "gpu_ids", "main_training_function", "rdzv_backend",
    "same_network", "tpu_env", "tpu_use_cluster", "tpu_use_sudo", "use_cpu",
};

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

std::string choices_list(const char* choices) {
  std::istringstream words(choices);
  std::string word, list;
  while (words >> word) list += (list.empty() ? "" : ", ") + word;
  return list;
}

std::vector<std::string> choice_words(const char* choices) {
  std::istringstream words(choices);
  std::vector<std::string> out;
  for (std::string word; words >> word;) out.push_back(word);
  return out;
}

// What a row accepts, as messages say it: "an integer from 1 to 4096".
std::string expectation(const OptionRow& row) {
  switch (row.kind) {
    case ValueKind::none: return "true or false";
    case ValueKind::integer:
      return "an integer from " + number_text(row.min) + " to " + number_text(row.max);
    case ValueKind::seconds:
      return "a number of seconds from " + number_text(row.min) + " to " + number_text(row.max);
    case ValueKind::text:
      return row.choices ? "one of " + choices_list(row.choices) : "a text";
  }
  return "a value";
}

// Converts `text` for `row`, or returns nothing when it is not acceptable.
std::optional<Value> convert(const OptionRow& row, const std::string& text) {
  Value value;
  value.text = text;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  if (row.kind == ValueKind::integer) {
    auto [stop, error] = std::from_chars(begin, end, value.integer);
    if (text.empty() || error != std::errc() || stop != end || value.integer < row.min ||
        value.integer > row.max) {
      return std::nullopt;
    }
  } else if (row.kind == ValueKind::seconds) {
    auto [stop, error] = std::from_chars(begin, end, value.number);
    // The negated test also rejects NaN.
    if (text.empty() || error != std::errc() || stop != end ||
        !(value.number >= row.min && value.number <= row.max)) {
      return std::nullopt;
    }
  } else if (row.kind == ValueKind::text && row.choices) {
    auto words = choice_words(row.choices);
    if (std::find(words.begin(), words.end(), text) == words.end()) return std::nullopt;
  } else if (row.kind == ValueKind::text && text.empty()) {
    return std::nullopt;
  }
  return value;
}

Value convert_argument(const OptionRow& row, const std::string& text) {
  if (auto value = convert(row, text)) return *value;
  if (row.kind == ValueKind::text && row.choices) {
    throw LaunchOptionsError("unsupported " + std::string(row.name) + " '" + text +
                             "' (supported: " + choices_list(row.choices) + ")" +
                             did_you_mean(text, choice_words(row.choices)));
  }
  throw LaunchOptionsError(std::string(row.name) + " expects " + expectation(row) + ", got '" +
                           text + "'");
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

Value convert_entry(const OptionRow& row, const ConfigEntry& entry, const std::string& path) {
  std::string where = path + ":" + std::to_string(entry.line) + ": key '" + entry.key + "' ";
  auto refuse = [&](const std::string& got) {
    std::string hint;
    if (row.kind == ValueKind::text && row.choices) {
      hint = did_you_mean(entry.text, choice_words(row.choices));
    }
    return ConfigError(where + "expects " + expectation(row) + ", got " + got + hint);
  };
  switch (entry.shape) {
    case ConfigEntry::Shape::empty: throw ConfigError(where + "has no value; it expects " + expectation(row));
    case ConfigEntry::Shape::compound: throw refuse(entry.text);
    case ConfigEntry::Shape::quoted:
      // A quoted number or switch is a string in YAML, whatever it looks like.
      if (row.kind != ValueKind::text) {
        throw refuse("the string '" + entry.text + "' (write it without quotes)");
      }
      break;
    case ConfigEntry::Shape::plain: break;
  }
  if (row.kind == ValueKind::none) {
    auto flag = yaml_bool(entry.text);
    if (!flag) throw refuse("'" + entry.text + "'");
    Value value;
    value.text = entry.text;
    value.integer = *flag ? 1 : 0;
    return value;
  }
  if (auto value = convert(row, entry.text)) return *value;
  throw refuse("'" + entry.text + "'");
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
      value.integer = 1;
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

void apply_config(LaunchOptions& options, const std::string& path) {
  ConfigFile file = read_config_file(path);
  std::vector<std::string> known = config_keys();
  for (const ConfigEntry& entry : file.entries) {
    const OptionRow* row = find_config_key(entry.key);
    if (!row) {
      bool accelerate_only = std::any_of(std::begin(kAccelerateOnlyKeys), std::end(kAccelerateOnlyKeys),
                                         [&](const char* key) { return entry.key == key; });
      if (accelerate_only) continue;
      throw ConfigError(path + ":" + std::to_string(entry.line) + ": unknown key '" + entry.key +
                        "'" + did_you_mean(entry.key, known));
    }
    row->apply(options, convert_entry(*row, entry, path));
    options.origins[row->name] = path + ":" + std::to_string(entry.line);
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
  if (options.threads == 0) options.threads = std::max(1, cpu_cores / options.nproc);
}

LaunchOptions options_from(const CommandLine& line, const std::string& config_path) {
  LaunchOptions options;
  options.threads = 0;  // not given yet
  if (!config_path.empty()) apply_config(options, config_path);
  options.recipe = line.recipe;
  options.recipe_args = line.recipe_args;
  for (const Setting& setting : line.settings) {
    setting.row->apply(options, setting.value);
    options.origins[setting.row->name] = kCommandLine;
  }
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
  std::ostringstream out;
  for (const OptionRow& row : kOptions) {
    if (!row.config_key) continue;
    auto origin = options.origins.find(row.name);
    std::string from = origin == options.origins.end() ? "default" : origin->second;
    if (std::string(row.name) == "--num-processes") {
      from = "--nproc x --nnodes";
    } else if (std::string(row.name) == "--threads" && origin == options.origins.end()) {
      from = "default: CPU cores / nproc";
    }
    out << row.config_key << ": " << row.show(options) << "  # " << from << '\n';
  }
  return out.str();
}

std::vector<std::string> config_keys() {
  std::vector<std::string> keys;
  for (const OptionRow& row : kOptions) {
    if (row.config_key) keys.emplace_back(row.config_key);
  }
  return keys;
}

std::string config_value_problem(const std::string& key, const std::string& text) {
  const OptionRow* row = find_config_key(key);
  if (!row) return "is not a config key" + did_you_mean(key, config_keys());
  ConfigEntry entry{key, text, ConfigEntry::Shape::plain, 0};
  try {
    convert_entry(*row, entry, "");
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
      << "       accel-run plot RUN_DIR... [-o FILE.png|FILE.svg] [--metric NAME] [--smooth K]\n\n"
      << "Runs a Lua training recipe on worker processes and supervises them.\n"
      << "`config` writes a config file, `env` describes this installation for a bug\n"
      << "report, `test` checks every collective on the configured ranks.\n\n"
      << "options:\n";
  for (const OptionRow& row : kOptions) {
    std::string names = row.alias ? std::string(row.alias) + ", " + row.name : row.name;
    if (row.metavar) names += std::string(" ") + row.metavar;
    out << "  " << names << std::string(names.size() < 34 ? 34 - names.size() : 1, ' ')
        << row.help << '\n';
  }
  return out.str();
}

}  // namespace accel
