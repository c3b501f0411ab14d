#include "engine/protocol/launch_options.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "engine/protocol/accel_variables.h"
#include "engine/protocol/config_file.h"
#include "engine/protocol/launch_option_table.h"
#include "engine/protocol/launch_option_values.h"
#include "engine/protocol/near_miss.h"
#include "engine/protocol/store_protocol.h"

namespace accel {

using options::contains_word;
using options::convert_argument;
using options::convert_entry;
using options::find_config_key;
using options::find_option;
using options::kDefaultZeroStage;
using options::kDistributedTypeKey;
using options::option_names;
using options::option_rows;
using options::quoted;
using options::OptionRow;
using options::row_named;
using options::SettingsSection;
using options::settings_sections;
using options::ShardingMethod;
using options::sharding_methods;
using options::switched_on;
using options::Value;
using options::ValueKind;

namespace {

constexpr const char* kUsage = "accel-run RECIPE.lua [options] [-- recipe args]";
constexpr const char* kCommandLine = "command line";

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
    case ConfigEntry::Shape::quoted: return quoted(entry.text);
    case ConfigEntry::Shape::empty: return "no value";
    case ConfigEntry::Shape::compound:
    case ConfigEntry::Shape::mapping: return entry.text;
  }
  return entry.text;
}

const ShardingMethod* method_with_section(const std::string& key) {
  for (const ShardingMethod& method : sharding_methods()) {
    if (key == method.section) return &method;
  }
  return nullptr;
}

const SettingsSection* settings_section_named(const std::string& key) {
  for (const SettingsSection& section : settings_sections()) {
    if (key == section.section) return &section;
  }
  return nullptr;
}

// Whether `row` is a setting in the file's mapping `section`.
bool in_section(const OptionRow& row, const char* section) {
  std::string prefix = std::string(section) + ".";
  return row.config_key && std::string(row.config_key).rfind(prefix, 0) == 0;
}
bool in_section(const OptionRow& row, const ShardingMethod& method) { return in_section(row, method.section); }

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
  for (const ShardingMethod& method : sharding_methods()) {
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

// Checks the settings of the file's mapping `name` (a sharding method's,
// titled `title`; keys of `accelerate_only` are accepted and ignored) and
// applies them when `applies` (not when the command line picks another method).
void apply_section(LaunchOptions& options, const char* name, const std::string& title, const char* accelerate_only,
                   const ConfigEntry& section, const std::string& path, bool applies) {
  if (section.shape == ConfigEntry::Shape::empty) return;
  if (section.shape != ConfigEntry::Shape::mapping) {
    throw ConfigError(file_line(path, section.line) + ": key '" + section.key + "' expects " +
                      title + "'s settings, indented below it as key: value lines, got " +
                      held(section));
  }
  std::vector<std::string> known;
  for (const OptionRow& row : option_rows()) {
    if (in_section(row, name)) known.push_back(key_in_section(row));
  }
  for (ConfigEntry setting : section.entries) {
    std::string key = std::string(name) + "." + setting.key;
    const OptionRow* row = find_config_key(key);
    if (!row) {
      if (contains_word(accelerate_only, setting.key)) continue;
      auto near = nearest_name(setting.key, known);
      throw ConfigError(file_line(path, setting.line) + ": unknown key '" + key + "'" +
                        (near ? " (did you mean '" + std::string(name) + "." + *near + "'?)" : ""));
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
      apply_section(options, method->section, method->title, method->accelerate_only, entry, path,
                    !picked || picked == method);
      continue;
    }
    if (const SettingsSection* section = settings_section_named(entry.key)) {
      apply_section(options, section->section, section->title, "", entry, path, true);
      continue;
    }
    // A key of a section's row stands only in its section.
    const OptionRow* row = entry.key.find('.') == std::string::npos ? find_config_key(entry.key) : nullptr;
    if (!row) {
      if (options::accelerate_only_key(entry.key)) continue;
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
  for (const ShardingMethod& method : sharding_methods()) {
    if (options.*method.used) return &method;
  }
  return nullptr;
}

// What the sharding settings mean together: a method's settings need the
// method, DeepSpeed without a stage gets Accelerate's, and
// TRANSFORMER_BASED_WRAP needs the classes it wraps.
void settle_sharding(LaunchOptions& options) {
  const ShardingMethod* used = method_in_use(options);
  for (const ShardingMethod& method : sharding_methods()) {
    if (&method == used) continue;
    for (const OptionRow& row : option_rows()) {
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

// The mesh's sizes the launch gives must multiply to its processes (a size
// not given counts 1), so that a wrong mesh stops before any rank starts.
void settle_parallelism(const LaunchOptions& options) {
  const ParallelismSizes& sizes = options.parallelism;
  if (!sizes.given()) return;
  const std::pair<const char*, int> given[] = {{"--parallelism-config-pp-size", sizes.pp},
                                               {"--parallelism-config-dp-replicate-size", sizes.dp_replicate},
                                               {"--parallelism-config-dp-shard-size", sizes.dp_shard},
                                               {"--parallelism-config-cp-size", sizes.cp},
                                               {"--parallelism-config-tp-size", sizes.tp}};
  long long product = 1;
  std::string named_sizes;
  for (const auto& [option, size] : given) {
    if (size == 0) continue;
    product *= size;
    named_sizes += (named_sizes.empty() ? "" : ", ") + named(options, option) + " " + std::to_string(size);
  }
  const long long processes = 1LL * options.nproc * options.nnodes;
  if (product != processes) {
    throw LaunchOptionsError("the mesh's sizes multiply to " + std::to_string(product) + " (" + named_sizes +
                             ") but the run has " + std::to_string(processes) + " process(es) (" +
                             named(options, "--nproc") + " " + std::to_string(options.nproc) + " x " +
                             named(options, "--nnodes") + " " + std::to_string(options.nnodes) +
                             "); their product must be the number of processes");
  }
  // ep borrows its ranks from dp_shard x cp (engine/parallel/device_mesh.h).
  const int shard_cp = std::max(sizes.dp_shard, 1) * std::max(sizes.cp, 1);
  if (sizes.ep > 0 && shard_cp % sizes.ep != 0) {
    throw LaunchOptionsError(named(options, "--parallelism-config-ep-size") + " " + std::to_string(sizes.ep) +
                             " must divide dp_shard x cp = " + std::to_string(shard_cp) +
                             ", the ranks expert parallelism borrows");
  }
}

// What follows from the settings together, and what only together can be wrong.
void settle(LaunchOptions& options, int cpu_cores, RecipeRule rule) {
  if (options.recipe.empty() && !options.help && rule == RecipeRule::required) {
    throw LaunchOptionsError(std::string("no recipe given; usage: ") + kUsage);
  }
  if (options.rdzv_token.size() > store_protocol::kMaxTokenBytes) {
    throw LaunchOptionsError(named(options, "--rdzv-token") + " has " + std::to_string(options.rdzv_token.size()) +
                             " bytes; the store takes tokens of at most " +
                             std::to_string(store_protocol::kMaxTokenBytes));
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
    // One limit on a machine's processes, however they are counted: --nproc's.
    const int most = static_cast<int>(row_named("--nproc").max);
    if (options.nproc > most) {
      throw LaunchOptionsError(named(options, "--num-processes") + " " + std::to_string(options.num_processes) +
                               " is " + std::to_string(options.nproc) + " processes on each of " +
                               std::to_string(options.nnodes) + " machine(s); a machine runs at most " +
                               std::to_string(most) + " (as --nproc)");
    }
  }
  if (options.nproc > cpu_cores) {
    options.warnings.push_back(std::to_string(options.nproc) + " processes on this machine's " +
                               std::to_string(cpu_cores) + " CPU core(s): they share the cores, " +
                               "each with " + (options.threads > 0 ? std::to_string(options.threads) : "1") +
                               " thread(s), and each step waits for the slowest");
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
  settle_parallelism(options);
}

// The sharding method the command line picks, or nullptr; picking two is refused.
const ShardingMethod* picked_by(const CommandLine& line) {
  const ShardingMethod* picked = nullptr;
  const OptionRow* picking = nullptr;
  for (const Setting& setting : line.settings) {
    for (const ShardingMethod& method : sharding_methods()) {
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
  const char* variable = std::getenv(variables::kConfigFile);
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
  for (const OptionRow& row : option_rows()) {
    if (!row.config_key || std::strchr(row.config_key, '.')) continue;
    std::string from = origin_of(row.name);
    if (std::string(row.name) == "--num-processes") {
      from = "--nproc x --nnodes";
    } else if (std::string(row.name) == "--threads" && !options.origins.count(row.name)) {
      from = "default: CPU cores / nproc";
    }
    out << row.config_key << ": " << row.show(options) << "  # " << from << '\n';
  }
  // A section holds the settings the launch gives, as the file would.
  auto section_lines = [&](const char* section) {
    std::string settings;
    for (const OptionRow& row : option_rows()) {
      std::string value = in_section(row, section) ? row.show(options) : "";
      if (value.empty()) continue;
      settings += "  " + key_in_section(row) + ": " + value + "  # " + origin_of(row.name) + "\n";
    }
    return settings.empty() ? std::string(" {}\n") : "\n" + settings;
  };
  const ShardingMethod* used = method_in_use(options);
  if (!used) {
    out << kDistributedTypeKey << ": 'NO'  # default: no sharding\n";
  } else {
    out << kDistributedTypeKey << ": " << used->distributed_type << "  # " << origin_of(used->option) << '\n';
    out << used->section << ":" << section_lines(used->section);
  }
  for (const SettingsSection& section : settings_sections()) out << section.section << ":" << section_lines(section.section);
  return out.str();
}

std::vector<std::string> config_keys() {
  std::vector<std::string> keys;
  for (const OptionRow& row : option_rows()) {
    if (row.config_key && !std::strchr(row.config_key, '.')) keys.emplace_back(row.config_key);
  }
  keys.emplace_back(kDistributedTypeKey);
  for (const ShardingMethod& method : sharding_methods()) keys.emplace_back(method.section);
  for (const SettingsSection& section : settings_sections()) keys.emplace_back(section.section);
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
      << "       accel-run serve [options]\n"
      << "       accel-run submit [--id ID] RECIPE.lua [-- ARGS]\n"
      << "       accel-run attach [RUN] | accel-run ctl [RUN] 'CHUNK'\n"
      << "       accel-run plot RUN_DIR... [-o FILE.png|FILE.svg] [--metric NAME] [--smooth K]\n\n"
      << "Runs a Lua training recipe on worker processes and supervises them.\n"
      << "`config` writes a config file, `env` describes this installation for a bug\n"
      << "report, `test` checks every collective on the configured ranks. `serve` keeps\n"
      << "warm workers (and the checkpoints recipes load) for the recipes `submit` sends it,\n"
      << "run one after another, each as a cold run would; `attach` and `ctl` steer a\n"
      << "running job (docs/live-runs.md).\n\n"
      << "options:\n";
  constexpr size_t kColumn = 34;  // where the help starts; longer names put it on a line of its own
  for (const OptionRow& row : option_rows()) {
    std::string names = row.alias ? std::string(row.alias) + ", " + row.name : row.name;
    if (row.metavar) names += std::string(" ") + row.metavar;
    std::string gap = names.size() < kColumn ? std::string(kColumn - names.size(), ' ')
                                             : "\n" + std::string(kColumn + 2, ' ');
    out << "  " << names << gap << row.help << '\n';
  }
  return out.str();
}

}  // namespace accel
