// The settings a launcher hands its workers in environment variables, beyond
// the torchrun contract (RANK, WORLD_SIZE, MASTER_ADDR, ...), and how a
// worker reads them back. A worker started by accel-run gets its settings
// only this way: its command line carries just the recipe and its
// arguments. The variables are named in accel_variables.h; the worker reads
// all of them here, into LaunchOptions, and the Lua side gets them from
// there as accel.core.launch (bindings/launch_settings.h).
#pragma once
#include <string>
#include <vector>

#include "engine/protocol/launch_options.h"

namespace accel {

// "NAME=value" for each setting of `options` a worker needs; the restart
// variables are the launcher's to add, per start.
std::vector<std::string> worker_variables(const LaunchOptions& options);

// Whether mpirun or srun started this process as one rank of several: its
// environment names an MPI rank (OpenMPI's, or PMI's with more than one
// task). A single task that srun starts is a launcher, as on one machine.
bool started_as_mpi_rank();

// What the launcher hands a worker besides its settings: the store's secret,
// the prefix of the run's shared memory names and the rank's error file.
struct WorkerHandoff {
  std::string rdzv_token;
  std::string shm_prefix;
  std::string error_file;
};

WorkerHandoff worker_handoff();

// Takes the launcher's hand-off (the store's secret, the shared memory
// prefix, the error file, the role, the control socket's number) out of the
// environment once the worker has read it (worker_handoff, its control
// socket): a process the recipe starts (accel-run inner.lua, accel-run
// plot) cannot take a rank's role, write to its error file or join its run.
// The run's settings (ACCEL_ZERO_STAGE, ACCEL_MIXED_PRECISION, ...) stay
// for recipes to read; a launcher started from a rank drops inherited ones
// (is_worker_variable) before setting its own.
void drop_worker_variables();

// Whether `name` is one of the variables a launcher sets for its workers.
bool is_worker_variable(const std::string& name);

// Overrides the fields of `options` whose variable is set, every variable
// worker_variables() writes and the restart count. Throws LaunchOptionsError
// naming a variable whose value is malformed.
void read_worker_variables(LaunchOptions& options);

}  // namespace accel
