// The command line of accel-run, and the config file under it:
//
//   accel-run RECIPE.lua [options] [-- recipe args]
//
// Options may come before or after the recipe, as `--opt value` or
// `--opt=value`; everything after `--` belongs to the recipe. The options are
// rows of one table (launch_option_table.cpp), which also produces --help and
// names the config-file key of each option (see config_file.h): the file
// sets what the command line leaves unsaid.
#pragma once
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/protocol/cpu_cores.h"

namespace accel {

// FSDP's settings, as the workers get them (worker_variables.h): the text of
// the value, "" where the launch does not say, leaving the recipe's plugin
// its own. The launcher only checks and passes them on.
struct FsdpSettings {
  std::string sharding_strategy;      // FULL_SHARD, SHARD_GRAD_OP or NO_SHARD
  std::string auto_wrap_policy;       // TRANSFORMER_BASED_WRAP, SIZE_BASED_WRAP or NO_WRAP
  std::string transformer_layer_cls;  // class names, comma-separated: "Block,Attention"
  std::string min_num_params;         // an integer
  std::string cpu_offload;            // true or false
  std::string state_dict_type;        // FULL_STATE_DICT or SHARDED_STATE_DICT
  std::string sync_module_states;     // true (the workers refuse false)
  std::string cpu_ram_efficient_loading;  // true or false
};

// The device mesh's sizes, the Accelerator's default ParallelismConfig
// (Accelerate's parallelism_config_*_size): 0 where the launch does not say,
// leaving the recipe's (or 1).
// The pipeline's settings (pp_schedule "" and pp_microbatches,
// pp_virtual_stages 0 where not given) travel with them.
struct ParallelismSizes {
  int dp_replicate = 0;
  int dp_shard = 0;
  int cp = 0;
  int tp = 0;
  int pp = 0;
  int ep = 0;
  std::string pp_schedule;
  int pp_microbatches = 0;
  int pp_virtual_stages = 0;
  bool given() const {
    return dp_replicate > 0 || dp_shard > 0 || cp > 0 || tp > 0 || pp > 0 || ep > 0 || !pp_schedule.empty() ||
           pp_microbatches > 0 || pp_virtual_stages > 0;
  }
};

struct LaunchOptions {
  std::string recipe;                    // the Lua file to run
  std::vector<std::string> recipe_args;  // what follows `--`
  int nproc = 1;                         // worker processes on this machine
  int num_processes = 0;                 // all nodes' processes when given so; sets nproc
  int threads = 1;                       // intra-op threads per rank, never 0 once parsed
  int nnodes = 1;                        // machines, each running its own accel-run
  int node_rank = 0;                     // this machine's place among them; 0 hosts the store
  std::string master_addr = "127.0.0.1";
  int master_port = 0;                   // 0: the launcher picks a free port (one node only)
  std::string backend = "gloo";
  double grace_period_s = 5;             // from SIGTERM to SIGKILL when stopping workers
  double timeout_s = 1800;               // a collective that takes longer fails the run
  double rdzv_timeout_s = 300;           // how long the nodes' launchers wait for each other
  std::string rdzv_token;                // --rdzv-token: the store's secret ("": see run_command.h)
  double stall_report_s = 60;            // report ranks stuck in a collective this long; 0: never
  int max_restarts = 0;                  // restarts of all workers after a failure
  int restart_count = 0;                 // a worker's: 0 on the first start, k after the k-th restart
  bool debug = false;                    // check every collective's operation and shapes across ranks
  bool watch = false;                    // --watch: warm workers rerun the recipe on every save
  bool repl = false;                     // accel-run repl: warm workers run the chunks typed
  bool serve = false;                    // accel-run serve: warm workers run the recipes submitted
  std::string log_dir;                   // each rank's output also goes to DIR/rank-N.log
  std::string mixed_precision;           // the Accelerator's default; "" leaves the recipe's
  int gradient_accumulation_steps = 0;   // the Accelerator's default; 0 leaves the recipe's
  // Sharding, the Accelerator's default (DESIGN.md, Accelerator): DeepSpeed's
  // ZeRO or FSDP, at most one. Neither leaves the recipe's choice.
  bool use_deepspeed = false;
  int zero_stage = 0;                    // 1-3 once settled with use_deepspeed; 0 otherwise
  std::string zero3_init_flag;           // true or false; "" where the launch does not say
  bool use_fsdp = false;
  FsdpSettings fsdp;
  ParallelismSizes parallelism;
  std::string config;                    // --config FILE
  std::string config_in_force;           // the file the options were read over; "" if none
  bool help = false;                     // -h/--help: print usage_text() and run nothing
  // Where each setting that is not a default came from, by option name
  // ("--nproc"): "command line" or "FILE:LINE".
  std::map<std::string, std::string> origins;
  // What the launcher says before it starts the ranks ("accel-run: warning: ...").
  std::vector<std::string> warnings;
};

// A command line that cannot be run; the message names the option or value at fault.
class LaunchOptionsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Whether the arguments must name a recipe: subcommands (accel-run test,
// accel-run env) take options without one.
enum class RecipeRule { required, none };

// Parses the arguments after the program name, alone (no config file).
// Without --threads, each rank gets cpu_cores / nproc threads, at least 1.
// Throws LaunchOptionsError.
LaunchOptions parse_launch_options(const std::vector<std::string>& args,
                                   int cpu_cores = usable_cpu_cores(),
                                   RecipeRule rule = RecipeRule::required);

// Where to look for a config file when --config is not given.
struct ConfigLookup {
  std::string from_variable;  // $ACCEL_CONFIG_FILE: must exist when set
  std::string default_path;   // read only if it exists
  static ConfigLookup from_environment();
};

// The command line over the config file in force: --config FILE, else
// lookup.from_variable, else lookup.default_path when that file exists.
// Also checks what only the whole can tell (node rank below the node count,
// a port for several nodes, num_processes divisible by num_machines).
// Throws LaunchOptionsError, or ConfigError naming file, line and key.
LaunchOptions resolve_launch_options(const std::vector<std::string>& args,
                                     const ConfigLookup& lookup = ConfigLookup::from_environment(),
                                     int cpu_cores = usable_cpu_cores(),
                                     RecipeRule rule = RecipeRule::required);

// Every config-file key with its value in `options`, one "key: value" line
// each, with where the value came from ("  # default", "  # command line",
// "  # FILE:LINE"): the config in force, as `accel-run env` shows it. Last,
// the sharding: distributed_type, and the section of the method in use
// with the settings the launch gives, indented below it.
std::string describe_settings(const LaunchOptions& options);

// The config-file keys accel-run knows at the top level of the file (the
// sharding sections among them), for did-you-mean suggestions and docs.
std::vector<std::string> config_keys();

// What is wrong with `text` as the value of config key `key` (as a plain
// YAML scalar; a key in a section as "fsdp_config.fsdp_offload_params"):
// "expects an integer from 1 to 4096, got 'x'"; "" when nothing is.
std::string config_value_problem(const std::string& key, const std::string& text);

// The --help text: usage line and one line per option.
std::string usage_text();

}  // namespace accel
