// A worker: one rank of a run. Embeds LuaJIT, opens the accel module and
// runs the recipe (worker_state.h); a Lua error ends the worker with its
// message and traceback in the rank's error file, for the launcher's
// report. Under `accel-run --watch` or `repl` it is a warm worker instead
// (warm_worker.h). This is the entry accel-run calls in a worker process.
#include <ATen/Parallel.h>
#include <malloc.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

extern "C" {
#include <lua.h>
}

#include "bindings/error_boundary.h"
#include "bindings/error_log.h"
#include "bindings/warm_worker.h"
#include "bindings/worker_state.h"
#include "engine/caching_cpu_allocator.h"
#include "engine/comm/communicator.h"
#include "engine/protocol/accel_variables.h"
#include "engine/protocol/launch_options.h"
#include "engine/protocol/worker_variables.h"

namespace accel::lua {
namespace {

std::string lua_directory() {
  if (const char* dir = std::getenv(variables::kLuaPath)) return dir;
  return ACCEL_LUA_DIR;
}

// A worker started by accel-run finds the recipe and its arguments on its
// command line and every setting in variables (engine/protocol/worker_variables.h).
// One started by mpirun or srun alone has only its command line and the
// config file; it sets the variables itself, for the Lua side to read.
LaunchOptions worker_options(const std::vector<std::string>& args) {
  const char* role = std::getenv(variables::kRole);
  bool launched = role && std::string(role) == "worker";
  LaunchOptions options = launched ? parse_launch_options(args) : resolve_launch_options(args);
  // No launcher store to rendezvous on: MPI is the way the ranks meet.
  if (!launched && started_as_mpi_rank() && !std::getenv("MASTER_PORT")) options.backend = "mpi";
  read_worker_variables(options);
  return options;
}

}  // namespace
}  // namespace accel::lua

extern "C" int accel_worker_main(int argc, char** argv) {
  using namespace accel;
  // Where this rank's errors go, first: every failure below is reported there.
  const WorkerHandoff handoff = worker_handoff();
  lua::set_error_file(handoff.error_file);
  // Lua's collector frees dead tensors in batches, and glibc's fast bins
  // then cost a consolidation pass over them on the next larger request:
  // without fast bins, small tensor ops from Lua run ~40% faster
  // (bench/op_overhead).
  ::mallopt(M_MXFAST, 0);
  // ACCEL_CPU_ALLOCATOR=system leaves LibTorch's own CPU allocator, over
  // whatever malloc the process has (bench/python/allocators.py compares
  // the engine's with glibc, jemalloc and tcmalloc so).
  const char* allocator = std::getenv(variables::kCpuAllocator);
  const std::string allocator_name = allocator ? allocator : "caching";
  if (allocator_name == "caching") {
    install_caching_cpu_allocator();
  } else if (allocator_name != "system") {
    lua::report_fatal("accel-run: ACCEL_CPU_ALLOCATOR is '" + allocator_name + "'; expected 'caching' or 'system'");
    return 2;
  }
  // Lines reach the launcher as they are printed, and none is lost when
  // the worker is stopped.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  LaunchOptions options;
  try {
    options = lua::worker_options(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const LaunchOptionsError& e) {
    lua::report_fatal(std::string("accel-run: ") + e.what());
    return 2;
  }
  at::set_num_threads(options.threads);

  CommunicatorOptions comm_options;
  comm_options.backend = options.backend;
  comm_options.backend_given = options.origins.count("--backend") > 0;
  comm_options.timeout = std::chrono::milliseconds(std::llround(options.timeout_s * 1000));
  comm_options.debug = options.debug;
  comm_options.rdzv_token = handoff.rdzv_token;
  comm_options.shm_prefix = handoff.shm_prefix;
  comm_options.error_file = handoff.error_file;
  const char* control = std::getenv(variables::kControlFd);
  const int control_fd = control ? std::atoi(control) : -1;
  drop_worker_variables();

  std::string lua_dir = lua::lua_directory();
  lua::set_library_source_prefix(lua_dir);
  if (control_fd >= 0) lua::serve_warm_commands(options, &comm_options, lua_dir, control_fd);
  lua_State* L = lua::new_worker_state(options, &comm_options, lua_dir);
  if (!lua::run_recipe(L, options.recipe)) lua::exit_with_error(lua_tostring(L, -1));
  lua_close(L);  // frees tensors and ends the communicator (MPI_Finalize included)
  std::fflush(nullptr);
  // LibTorch's static destructors deregister every kernel one by one (about
  // 0.1 s); a finished worker has nothing left for them to do.
  std::_Exit(0);
}
