// `accel-run env`: what a bug report needs to know about this installation,
// as lines to paste: versions (accel, LibTorch, LuaJIT, MPI, NCCL), the
// backends compiled in, cores and threads, which BLAS libblas.so.3 resolves
// to (with a warning for the slow reference BLAS), the config in force, and
// the device mesh its parallelism_config sizes make (each dim's groups).
//
// The launcher has no LibTorch, so it loads the worker library and asks it
// for the versions (its exported `accel_worker_facts`, see
// bindings/worker_facts.cpp): the facts are those of the very libraries a
// worker runs with. The mesh needs no worker: its arithmetic is protocol's
// (engine/protocol/device_mesh.h), the same code the workers run.
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

namespace accel {

struct EnvContext {
  std::string version;         // accel's version
  std::string accel_run;       // this program's path
  std::string worker_library;  // libaccel_worker.so beside it
};

// `args` are the options after "env" (a --config FILE or --nproc shows the
// config in force with them). Returns 0, 1 when the worker library cannot be
// loaded (the rest is still printed), 2 for a bad command line or config.
int run_env_command(const std::vector<std::string>& args, const EnvContext& context,
                    std::ostream& out, std::ostream& err);

}  // namespace accel
