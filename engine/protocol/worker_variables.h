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

// Overrides the fields of `options` whose variable is set, every variable
// worker_variables() writes and the restart count. Throws LaunchOptionsError
// naming a variable whose value is malformed.
void read_worker_variables(LaunchOptions& options);

}  // namespace accel
