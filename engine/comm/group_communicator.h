// Collectives over a subset of the world's ranks (a device mesh's dim, as
// torch.distributed.new_group makes them): a Communicator whose rank() and
// size() are this process's place in the group. Over Gloo it is a c10d
// ProcessGroupGloo of the members alone, which rendezvous under store keys
// of the group's own, behind a shared memory segment of its own when every
// rank of the run is on this machine (as make_communicator does for the
// world). Over MPI it is an MPI communicator of the members
// (engine/comm/mpi_group_communicator.h). Only the group's members make it,
// and no collective of the whole world is needed to do so.
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
// groups in the same order, as they run the same recipe. Groups over
// nccl are not implemented yet: the error says so.
// Not monitored (engine/comm/monitored_communicator.h): a stalled group
// collective fails after options.timeout with Gloo's own message.
std::unique_ptr<Communicator> make_group_communicator(const ProcessState& state,
                                                      const CommunicatorOptions& options,
                                                      const std::string& name,
                                                      const std::vector<int>& ranks);

}  // namespace accel
