// A device mesh's group over MPI (engine/comm/group_communicator.h, under
// `accel-run --backend mpi`): an MPI communicator of the members alone, made
// by MPI_Comm_create_group over the world, which only the members call.
#pragma once
#include <chrono>
#include <memory>
#include <vector>

#include "engine/comm/communicator.h"

namespace accel {

// `ranks`: global ranks, ascending, this process's among them (checked by
// the caller); every member makes its groups in the same order. The
// group's collectives and send_recv fail after `timeout`.
std::unique_ptr<Communicator> make_mpi_group_communicator(const std::vector<int>& ranks,
                                                          std::chrono::milliseconds timeout);

}  // namespace accel
