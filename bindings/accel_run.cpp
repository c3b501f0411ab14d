// accel-run: the launcher, and the program every worker runs.
//
// Launcher mode parses the command line, hosts the rendezvous store and
// supervises one worker per rank, each this same executable started again
// with ACCEL_ROLE=worker. Worker mode (that variable, or a rank given by
// mpirun or srun) loads libaccel_worker.so from this executable's directory
// and hands it the command line. Only workers load LibTorch and Lua, so the
// launcher stays a few megabytes.
#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "engine/launch/error_file.h"
#include "engine/launch/launch_options.h"
#include "engine/launch/store_server.h"
#include "engine/launch/supervisor.h"

extern char** environ;

namespace {

bool is_worker() {
  const char* role = std::getenv("ACCEL_ROLE");
  if (role && std::string_view(role) == "worker") return true;
  return std::getenv("OMPI_COMM_WORLD_RANK") || std::getenv("PMI_RANK");
}

std::string executable_directory() {
  char path[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return ".";
  std::string exe(path, static_cast<size_t>(n));
  return exe.substr(0, exe.rfind('/'));
}

// Ends a worker that cannot start: the reason goes to its error file, where
// the launcher's report shows it, or to stderr without a launcher (mpirun).
int worker_cannot_start(const std::string& message) {
  const char* error_file = std::getenv(accel::kErrorFileVariable);
  if (!error_file || !accel::append_error_record(error_file, accel::kFatalRecord, message)) {
    std::fprintf(stderr, "%s\n", message.c_str());
  }
  return 1;
}

int run_worker(int argc, char** argv) {
  std::string library = executable_directory() + "/libaccel_worker.so";
  void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_GLOBAL);
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

int run_launcher(int argc, char** argv) {
  accel::LaunchOptions options;
  try {
    options = accel::parse_launch_options(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const accel::LaunchOptionsError& error) {
    std::fprintf(stderr, "accel-run: error: %s\nTry 'accel-run --help' for more information.\n",
                 error.what());
    return 2;
  }
  if (options.help) {
    std::fputs(accel::usage_text().c_str(), stdout);
    return 0;
  }
  // Checked here so a typo fails at once rather than in every rank.
  if (::access(options.recipe.c_str(), R_OK) != 0) {
    std::fprintf(stderr, "accel-run: error: cannot read the recipe '%s': %s\n",
                 options.recipe.c_str(), std::strerror(errno));
    return 2;
  }
  try {
    accel::StoreServer store(options.master_addr, static_cast<uint16_t>(options.master_port));
    accel::SupervisorOptions supervision;
    // /proc/self/exe rather than a path: it stays this very binary even if
    // the file is rebuilt or moved while the run goes on.
    supervision.command.program = "/proc/self/exe";
    supervision.command.argv.assign(argv, argv + argc);
    for (char** entry = environ; *entry; ++entry) supervision.command.env.emplace_back(*entry);
    supervision.nproc = options.nproc;
    supervision.threads = options.threads;
    supervision.master_addr = options.master_addr;
    supervision.master_port = store.port();
    supervision.grace_period =
        std::chrono::milliseconds(std::llround(options.grace_period_s * 1000));
    accel::SupervisorResult result = accel::supervise(supervision);
    std::fputs(result.report.c_str(), stderr);
    return result.exit_code;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "accel-run: error: %s\n", error.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  return is_worker() ? run_worker(argc, argv) : run_launcher(argc, argv);
}
