// accel-run: the launcher, its subcommands, and the program every worker runs.
//
// Launcher mode reads the command line over the config file, then runs the
// recipe on this machine's workers (engine/launch/run_command.h), each this
// same executable started again with ACCEL_ROLE=worker. `accel-run config`,
// `accel-run env`, `accel-run test`, `accel-run plot`, `accel-run repl` and
// `accel-run estimate-memory` are subcommands, as are `attach`, `ctl`,
// `serve` and `submit`. Worker mode (that variable,
// or a rank given by mpirun or srun) loads libaccel_worker.so from
// this executable's directory and hands it the command line. Only workers
// (and `env`, to ask them) load LibTorch and Lua, so the launcher stays a
// few megabytes.
#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "engine/launch/config_command.h"
#include "engine/launch/env_command.h"
#include "engine/launch/live_command.h"
#include "engine/launch/mpi_launch.h"
#include "engine/launch/plot_command.h"
#include "engine/launch/repl_command.h"
#include "engine/launch/run_command.h"
#include "engine/launch/run_guardian.h"
#include "engine/launch/serve_command.h"
#include "engine/launch/test_command.h"
#include "engine/protocol/accel_variables.h"
#include "engine/protocol/config_file.h"
#include "engine/protocol/error_file.h"
#include "engine/protocol/launch_options.h"
#include "engine/protocol/worker_variables.h"

extern char** environ;

namespace {

bool is_worker() {
  const char* role = std::getenv(accel::variables::kRole);
  if (role && std::string_view(role) == "worker") return true;
  return accel::started_as_mpi_rank();
}

std::string executable_path() {
  char path[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : "accel-run";
}

std::string executable_directory() {
  std::string exe = executable_path();
  size_t slash = exe.rfind('/');
  return slash == std::string::npos ? "." : exe.substr(0, slash);
}

std::string lua_directory() {
  if (const char* dir = std::getenv(accel::variables::kLuaPath)) return dir;
  return ACCEL_LUA_DIR;
}

// Ends a worker that cannot start: the reason goes to its error file, where
// the launcher's report shows it, or to stderr without a launcher (mpirun).
int worker_cannot_start(const std::string& message) {
  const char* error_file = std::getenv(accel::variables::kErrorFile);
  if (!error_file || !accel::append_error_record(error_file, accel::kFatalRecord, message)) {
    std::fprintf(stderr, "%s\n", message.c_str());
  }
  return 1;
}

int run_worker(int argc, char** argv) {
  // Ranks that mpirun started for accel-run share one error directory; each
  // takes its own file there, named by its MPI rank.
  const char* error_dir = std::getenv(accel::variables::kErrorDir);
  const char* mpi_rank = std::getenv("OMPI_COMM_WORLD_RANK");
  if (error_dir && mpi_rank) {
    std::string file = std::string(error_dir) + "/rank-" + mpi_rank + ".error";
    ::setenv(accel::variables::kErrorFile, file.c_str(), 1);
  }
  std::string library = executable_directory() + "/libaccel_worker.so";
  // Lazy binding: LibTorch has tens of thousands of symbols a recipe never
  // calls, and resolving them all up front is most of a worker's start.
  void* handle = ::dlopen(library.c_str(), RTLD_LAZY | RTLD_GLOBAL);
  if (!handle) {
    return worker_cannot_start(std::string("accel-run: cannot load the worker library: ") +
                               ::dlerror());
  }
  using Entry = int (*)(int, char**);
  auto entry = reinterpret_cast<Entry>(::dlsym(handle, "accel_worker_main"));
  if (!entry) {
    return worker_cannot_start(
        std::string("accel-run: the worker library has no entry point: ") + ::dlerror());
  }
  return entry(argc, argv);
}

accel::RunContext run_context() {
  accel::RunContext context;
  context.accel_run = executable_path();
  for (char** entry = environ; *entry; ++entry) context.env.emplace_back(*entry);
  return context;
}

// -h or --help before any `--`: the help needs no config file, and a broken
// one must not hide it.
bool wants_help(const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    if (arg == "--") return false;
    if (arg == "-h" || arg == "--help") return true;
  }
  return false;
}

int run_launcher(const std::vector<std::string>& args) {
  if (wants_help(args)) {
    std::fputs(accel::usage_text().c_str(), stdout);
    return 0;
  }
  accel::LaunchOptions options;
  try {
    options = accel::resolve_launch_options(args);
  } catch (const accel::ConfigError& error) {
    std::fprintf(stderr, "accel-run: error: %s\n", error.what());
    return 2;
  } catch (const accel::LaunchOptionsError& error) {
    std::fprintf(stderr, "accel-run: error: %s\nTry 'accel-run --help' for more information.\n",
                 error.what());
    return 2;
  }
  // Checked here so a typo fails at once rather than in every rank.
  if (::access(options.recipe.c_str(), R_OK) != 0) {
    std::fprintf(stderr, "accel-run: error: cannot read the recipe '%s': %s\n",
                 options.recipe.c_str(), std::strerror(errno));
    return 2;
  }
  return accel::run_recipe(options, run_context());
}

// `accel-run estimate-memory MODEL.lua [...]`: one worker runs the Lua side
// (lua/accel/commands/estimate_memory.lua), which builds the model
// without memory and prints the estimate; its arguments go to it as a
// recipe's do.
int run_estimate_memory(const std::vector<std::string>& rest) {
  if (wants_help(rest) || rest.empty()) {
    std::fputs("usage: accel-run estimate-memory MODEL.lua [--dtypes float32 float16 bfloat16] "
               "[--num-processes N] [--no-split CLASS ...]\n", rest.empty() ? stderr : stdout);
    return rest.empty() ? 2 : 0;
  }
  std::vector<std::string> args{lua_directory() + "/accel/commands/estimate_memory.lua", "--nproc", "1", "--"};
  args.insert(args.end(), rest.begin(), rest.end());
  return run_launcher(args);
}

}  // namespace

int main(int argc, char** argv) {
  const char* role = std::getenv(accel::variables::kRole);
  if (role && std::string_view(role) == accel::kGuardianRole) {
    const char* prefix = std::getenv(accel::variables::kShmPrefix);
    return accel::run_guardian(prefix ? prefix : "");
  }
  if (is_worker()) return run_worker(argc, argv);
  std::vector<std::string> args(argv + 1, argv + argc);
  const std::string verb = args.empty() ? "" : args.front();
  std::vector<std::string> rest(args.begin() + (args.empty() ? 0 : 1), args.end());
  if (verb == "config") return accel::run_config_command(rest, std::cin, std::cout, std::cerr);
  if (verb == "env") {
    accel::EnvContext context{ACCEL_VERSION, executable_path(),
                              executable_directory() + "/libaccel_worker.so"};
    return accel::run_env_command(rest, context, std::cout, std::cerr);
  }
  if (verb == "test") return accel::run_test_command(rest, run_context(), lua_directory());
  if (verb == "plot") return accel::run_plot_command(rest, std::cout, std::cerr);
  if (verb == "estimate-memory") return run_estimate_memory(rest);
  if (verb == "repl") return accel::run_repl_command(rest, run_context());
  if (verb == "serve") return accel::run_serve_command(rest, run_context());
  if (verb == "submit") return accel::run_submit_command(rest);
  if (verb == "attach" || verb == "ctl") return accel::run_live_command(verb, rest, std::cin, std::cout, std::cerr);
  return run_launcher(args);
}
