// Collectives over a subset of the world's ranks (a device mesh's dim, as
// torch.distributed.new_group makes them): a Communicator whose rank() and
// size() are this process's place in the group. Over Gloo it is a c10d
// ProcessGroupGloo of the members alone, which rendezvous under store keys
// of the group's own, behind a shared memory segment of its own when every
// rank of the run is on this machine (as make_communicator does for the
// world). Over NCCL it is, as the world is, a c10d ProcessGroupNCCL of the
// members for CUDA tensors paired with such a Gloo group for host tensors
// (engine/comm/device_routed_communicator.h). Over MPI it is an MPI
// communicator of the members (engine/comm/mpi_group_communicator.h). Only
// the group's members make it, and no collective of the whole world is
// needed to do so.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"

namespace accel {

// `ranks` are global ranks, ascending, without repeats, and must contain
// state.rank; every member passes the same `name` and `ranks`. A group of
// one rank needs no peers (every collective is the identity). A name may be
// made again (a recipe rerun in a warm worker, a second mesh): each making
// in this process rendezvouses afresh, so the members must make the same
// groups in the same order, as they run the same recipe.
// Not monitored (engine/comm/monitored_communicator.h): a stalled group
// collective fails after options.timeout with its backend's own message.
std::unique_ptr<Communicator> make_group_communicator(const ProcessState& state,
                                                      const CommunicatorOptions& options,
                                                      const std::string& name,
                                                      const std::vector<int>& ranks);

// The Gloo or NCCL communicator of `group_size` ranks, this process being
// `group_rank`, rendezvousing under the store keys starting with
// `store_prefix`: Gloo behind a shared memory segment when every rank of
// the run is on this machine (unless options.shared_memory is off or the
// environment sets ACCEL_SHARED_MEMORY=0), and on nccl NCCL for CUDA
// tensors paired with that for host tensors. The world's (prefix "") and
// every group's, made the same way.
std::unique_ptr<Communicator> make_c10d_communicator(const ProcessState& state,
                                                     const CommunicatorOptions& options,
                                                     const std::string& store_prefix, int group_rank,
                                                     int group_size);

}  // namespace accel
