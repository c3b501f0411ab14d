// The command line of accel-run:
//
//   accel-run RECIPE.lua [options] [-- recipe args]
//
// Options may come before or after the recipe, as `--opt value` or
// `--opt=value`; everything after `--` belongs to the recipe. The options are
// rows of one table in launch_options.cpp, which also produces --help.
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/launch/cpu_cores.h"

namespace accel {

struct LaunchOptions {
  std::string recipe;                    // the Lua file to run
  std::vector<std::string> recipe_args;  // what follows `--`
  int nproc = 1;                         // worker processes on this machine
  int threads = 1;                       // intra-op threads per rank, never 0 once parsed
  std::string master_addr = "127.0.0.1";
  int master_port = 0;                   // 0: the launcher picks a free port
  std::string backend = "gloo";
  double grace_period_s = 5;             // from SIGTERM to SIGKILL when stopping workers
  bool help = false;                     // -h/--help: print usage_text() and run nothing
};

// A command line that cannot be run; the message names the option or value at fault.
class LaunchOptionsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Parses the arguments after the program name. Without --threads, each rank
// gets cpu_cores / nproc threads, at least 1. Throws LaunchOptionsError.
LaunchOptions parse_launch_options(const std::vector<std::string>& args,
                                   int cpu_cores = usable_cpu_cores());

// The --help text: usage line and one line per option.
std::string usage_text();

}  // namespace accel
