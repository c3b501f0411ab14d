#include "engine/comm/mpi_group_communicator.h"

#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <stdexcept>
#include <string>

#include "engine/comm/mpi_communicator.h"

namespace accel {

std::unique_ptr<Communicator> make_mpi_group_communicator(const std::vector<int>& ranks,
                                                          std::chrono::milliseconds timeout) {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) {
    throw std::invalid_argument("an mpi group needs the run's world communicator over mpi first");
  }
  MPI_Group world = MPI_GROUP_NULL;
  MPI_Group members = MPI_GROUP_NULL;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  MPI_Group_incl(world, static_cast<int>(ranks.size()), ranks.data(), &members);
  // Collective over the members only (MPI-3), so ranks outside the group
  // need not take part; members make their groups in the same order, so
  // one tag serves every making.
  constexpr int kTag = 0;
  MPI_Comm comm = MPI_COMM_NULL;
  const int code = MPI_Comm_create_group(MPI_COMM_WORLD, members, kTag, &comm);
  MPI_Group_free(&members);
  MPI_Group_free(&world);
  if (code != MPI_SUCCESS || comm == MPI_COMM_NULL) {
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, text, &length);
    throw CollectiveError("mpi: making a group of " + std::to_string(ranks.size()) +
                          " ranks failed: " + std::string(text, length));
  }
  return std::make_unique<MpiCommunicator>(MPI_Comm_c2f(comm), timeout);
}

}  // namespace accel
